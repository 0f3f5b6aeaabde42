"""The memory app's part of the API; accelopt_site/api.py mounts this router under /api/."""

from __future__ import annotations

from ninja import Router

router = Router()
