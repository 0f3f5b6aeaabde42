"""The top navigation. An entry appears once its URL name exists, so sections show up as apps add them."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import NoReverseMatch, reverse

# (label, URL name). Apps own the URL names; this list only decides the order.
NAV_ITEMS: tuple[tuple[str, str], ...] = (
    ("Leaderboard", "benchmark:leaderboard"),
    ("Problems", "benchmark:problems"),
    ("Kernels", "benchmark:kernels"),
    ("Runs", "optimizer:runs"),
    ("Campaigns", "campaigns:list"),
    ("Memory", "memory:entries"),
    ("API", "api:openapi-view"),
)


@dataclass(frozen=True)
class NavLink:
    label: str
    url: str
    active: bool


def nav_links(current_path: str) -> list[NavLink]:
    links = []
    for label, url_name in NAV_ITEMS:
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        links.append(NavLink(label=label, url=url, active=current_path.startswith(url)))
    return links
