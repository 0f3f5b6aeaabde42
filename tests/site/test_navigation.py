"""The top navigation lists only sections whose pages exist, so it grows as apps add pages."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def nav_labels(html: str) -> list[str]:
    nav = re.search(r'<nav class="site-nav"[^>]*>(.*?)</nav>', html, re.S).group(1)
    return re.findall(r">([^<]+)</a>", nav)


@pytest.mark.urls("tests.site.navurls")
def test_nav_shows_only_the_api_when_no_app_has_pages(client):
    assert nav_labels(client.get("/").content.decode()) == ["API"]


@pytest.mark.urls("tests.site.navurls_leaderboard")
def test_a_section_appears_once_its_url_exists_and_is_marked_current(client):
    html = client.get("/leaderboard/").content.decode()
    assert nav_labels(html) == ["Leaderboard", "API"]
    assert '<a href="/leaderboard/" aria-current="page">Leaderboard</a>' in html


def test_base_page_loads_htmx_and_its_websocket_extension_from_our_static_files(client):
    html = client.get("/").content.decode()
    assert '<script src="/static/django_htmx/htmx-2.min.js" defer></script>' in html
    assert '<script src="/static/django_htmx/ext/hx-ws-2.min.js" defer></script>' in html
    assert "https://" not in html.split("</head>")[0]  # no CDN


def test_signed_in_user_sees_their_name_roles_and_a_logout_button(client, curator):
    client.force_login(curator)
    html = client.get("/").content.decode()
    assert "cora" in html and '<span class="badge">curator</span>' in html
    assert 'action="/accounts/logout/"' in html
