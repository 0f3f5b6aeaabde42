from __future__ import annotations

from tests.site.navurls import with_leaderboard as urlpatterns  # noqa: F401
