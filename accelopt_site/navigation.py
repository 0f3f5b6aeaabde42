"""The top navigation. An entry appears once its URL name exists, so sections show up as apps add them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import NoReverseMatch, reverse

from accounts.roles import ENGINEER, has_role

# (label, URL name, role needed to open it or None). Apps own the URL names; this list decides the order,
# and hides an entry from visitors the page would only send to the login page or a 403.
NAV_ITEMS: tuple[tuple[str, str, str | None], ...] = (
    ("Leaderboard", "benchmark:leaderboard", None),
    ("Problems", "benchmark:problems", None),
    ("Kernels", "benchmark:kernels", None),
    ("Runs", "optimizer:runs", None),
    ("Campaigns", "campaigns:list", None),
    ("Memory", "memory:entries", ENGINEER),  # memory.views: every page needs the engineer role
    ("API", "api:openapi-view", None),
)


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    active: bool


def nav_links(current_path: str, user: Any = None) -> list[NavLink]:
    links = []
    for label, url_name, role in NAV_ITEMS:
        if role is not None and not has_role(user, role):
            continue
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        links.append(NavLink(label=label, url=url, active=current_path.startswith(url)))
    return links
