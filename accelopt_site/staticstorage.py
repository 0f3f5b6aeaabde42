"""Static files storage: hashed names and gzip/brotli copies made by `manage.py collectstatic` (WhiteNoise),
so the server can send each file compressed and let browsers cache it for a year.

`make run` collects before it serves (`make prepare`). Where nothing was collected (tests, a checkout that only
ran migrate), or a file was added since, `{% static %}` falls back to the plain name, which WhiteNoise serves
from the finders (WHITENOISE_USE_FINDERS) uncompressed and with a short cache lifetime: a page never fails
because collectstatic has not run.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:  # not collected: the plain name, served from the finders
            return name
