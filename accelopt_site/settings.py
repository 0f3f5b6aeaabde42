"""Settings for AccelOpt Studio.

Everything that differs between machines comes from the environment (see docs/operations.md, which lists
every variable). The defaults give the embedded mode: one daphne process, SQLite under var/, the
in-memory channel layer, no internet needed. DATABASE_URL and REDIS_URL switch on scale-out.
"""

from __future__ import annotations

import warnings
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF, UNSAFE_INLINE

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
    # Browsers then refuse plain HTTP to this host for the time given (SecurityMiddleware sends the header on
    # HTTPS responses only). 0 turns it off, e.g. while trying HTTPS out.
    SECURE_HSTS_SECONDS = env_int("ACCELOPT_HSTS_SECONDS", 31536000, minimum=0, maximum=2 * 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("ACCELOPT_HSTS_INCLUDE_SUBDOMAINS", False)

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
    "axes",  # login throttling (accounts/throttle.py)
    "csp",  # Content-Security-Policy header (below)
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
    "accelopt_site.uploads.UploadSizeLimitMiddleware",  # first: an over-sized body is refused unread
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # the Content-Security-Policy below
    # Static files, compressed and cached (see "Static files" below); removed when a proxy serves them.
    "accelopt_site.staticserving.AsyncCapableWhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into accounts.throttle.locked_out's page.
    "axes.middleware.AxesMiddleware",
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
CSRF_FAILURE_VIEW = "accelopt_site.api.csrf_failure"  # JSON under /api/
AUTHENTICATION_BACKENDS = [
    "accounts.throttle.LoginThrottleBackend",  # first: refuses a locked-out username and address
    "django.contrib.auth.backends.ModelBackend",
]
# Login throttling (django-axes, accounts/throttle.py): this many wrong passwords for one username from one
# address lock that pair for the cool-off; a right password resets the count. 0 minutes: locked until an admin
# runs `manage.py axes_reset_username NAME`.
AXES_FAILURE_LIMIT = env_int("ACCELOPT_LOGIN_FAILURE_LIMIT", 5, minimum=1, maximum=1000)
_LOGIN_COOLOFF_MINUTES = env_int("ACCELOPT_LOGIN_COOLOFF_MINUTES", 15, minimum=0, maximum=7 * 24 * 60)
AXES_COOLOFF_TIME = timedelta(minutes=_LOGIN_COOLOFF_MINUTES) if _LOGIN_COOLOFF_MINUTES else None
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.throttle.locked_out"
AXES_VERBOSE = False
# Per-person quotas (accounts/quotas.py), 0 for no limit: evaluations one person may have queued or running, and
# optimization runs queued or running. A campaign's runs count against its own max_concurrent_runs instead,
# which may not exceed the runs quota.
ACCELOPT_QUOTA_QUEUED_EVALUATIONS = env_int("ACCELOPT_QUOTA_QUEUED_EVALUATIONS", 20, minimum=0, maximum=100000)
ACCELOPT_QUOTA_RUNS_IN_FLIGHT = env_int("ACCELOPT_QUOTA_RUNS_IN_FLIGHT", 4, minimum=0, maximum=10000)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

# --- Content-Security-Policy (django-csp) ------------------------------------------------------------

# Scripts only from this site's own files: htmx, plotly.js and our glue are static files, and figures are JSON that
# static/js/plotly_figures.js draws, so no inline script or eval is needed. Inline styles stay allowed: htmx and
# plotly.js set them. connect-src 'self' covers the live run and campaign websockets (same host, ws or wss).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# --- Uploads --------------------------------------------------------------------------------------

# The most one request may upload, on every path (accelopt_site/uploads.py): refused with 413 before its body is
# read. Files over FILE_UPLOAD_MAX_MEMORY_SIZE stream to a temporary file instead of memory.
ACCELOPT_MAX_UPLOAD_BYTES = env_int("ACCELOPT_MAX_UPLOAD_BYTES", 10 * 1024 * 1024, minimum=64 * 1024,
                                    maximum=1024 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = ACCELOPT_MAX_UPLOAD_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024
FILE_UPLOAD_HANDLERS = [
    "accelopt_site.uploads.CappedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

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
    MIDDLEWARE.remove("accelopt_site.staticserving.AsyncCapableWhiteNoiseMiddleware")
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
