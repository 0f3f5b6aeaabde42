"""Settings for AccelOpt Studio.

Everything that differs between machines comes from the environment (see docs/operations.md, which lists
every variable). The defaults give the embedded mode: one daphne process, SQLite under var/, the
in-memory channel layer, no internet needed. DATABASE_URL and REDIS_URL switch on scale-out.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from accelopt_site.env import (
    channel_layers_from_url,
    database_from_url,
    env_bool,
    env_choice,
    env_int,
    env_list,
    env_secret,
    env_str,
    persistent_secret,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# Runtime state (database, generated secret key, collected static files) lives here, never in git.
VAR_DIR = Path(env_str("ACCELOPT_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite creates the file but not its directory

# --- Core -----------------------------------------------------------------------------------------

DEBUG = env_bool("ACCELOPT_DEBUG", False)
# No fixed default key: generate one per installation and keep it, so sessions survive restarts.
SECRET_KEY = env_secret("ACCELOPT_SECRET_KEY") or persistent_secret(VAR_DIR / "secret_key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
# Needed only behind an HTTPS proxy on another host name, e.g. https://studio.example.com
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Behind a proxy that terminates TLS: cookies only over HTTPS, and trust the proxy's X-Forwarded-Proto.
ACCELOPT_HTTPS = env_bool("ACCELOPT_HTTPS", False)
if ACCELOPT_HTTPS:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "ninja",  # listed so /api/docs uses its bundled Swagger UI instead of a CDN
    "accelopt_site",
    "accounts",
    "benchmark",
    "memory",
    "optimizer",
    "campaigns",
    "mcp_server",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files, compressed and cached (see "Static files" below); removed when a proxy serves them.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "accelopt_site.urls"
ASGI_APPLICATION = "accelopt_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accelopt_site.context_processors.site",
            ],
        },
    },
]

# --- Data and messaging ---------------------------------------------------------------------------

DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'accelopt.sqlite3'}"), base_dir=BASE_DIR
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CHANNEL_LAYERS = channel_layers_from_url(env_str("REDIS_URL"))

# --- People ---------------------------------------------------------------------------------------

LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# --- Static files ---------------------------------------------------------------------------------

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise indexes it at start, collected or not
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # plotly.min.js straight from the installed plotly package: no vendored copy in git, no CDN.
    "accelopt_site.staticfinders.PackageFileFinder",
]
# Served from the packages that ship them, under these URL paths (relative to STATIC_URL).
ACCELOPT_PACKAGE_STATIC_FILES = {
    "vendor/plotly.min.js": ("plotly", "package_data/plotly.min.js"),
}
# Embedded mode: WhiteNoise serves /static/ from daphne itself: what `manage.py collectstatic` (run by
# `make prepare`) wrote to STATIC_ROOT, under content-hashed names with gzip and brotli copies, cached by
# browsers for a year; anything not collected comes from the finders, uncompressed (accelopt_site/staticstorage.py).
# Turn off when a reverse proxy serves STATIC_ROOT.
ACCELOPT_SERVE_STATIC = env_bool("ACCELOPT_SERVE_STATIC", True)
if not ACCELOPT_SERVE_STATIC:
    MIDDLEWARE.remove("whitenoise.middleware.WhiteNoiseMiddleware")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "accelopt_site.staticstorage.StaticStorage"},
}
WHITENOISE_USE_FINDERS = True
# Django warns for every sync-iterated file response under ASGI; WhiteNoise's are files of at most a few MB
# (compressed), which Django reads in a worker thread: expected here, not a problem to report per file.
warnings.filterwarnings("ignore", message="StreamingHttpResponse must consume synchronous iterators")
# Pages only ever name the hashed copies once collected; the plain names come from the finders. Keeping one
# copy halves collectstatic's compression work.
WHITENOISE_KEEP_ONLY_HASHED_FILES = True

# A watchdog logs every thread's stack when the event loop or an evaluation worker makes no progress for this
# long (accelopt_site/watchdog.py, docs/operations.md); 0 turns it off.
ACCELOPT_STALL_SECONDS = env_int("ACCELOPT_STALL_SECONDS", 60, minimum=0, maximum=86400)

# --- Misc -----------------------------------------------------------------------------------------

USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_choice("ACCELOPT_LOG_LEVEL", "INFO", LOG_LEVELS)},
}

# --- App settings (each app appends its own block below, reading the environment via env.py) ------
