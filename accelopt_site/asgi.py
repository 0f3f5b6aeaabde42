"""ASGI entry point: `daphne accelopt_site.asgi:application`.

HTTP goes to Django (with /static/ served in-process by WhiteNoise in the embedded mode; /mcp to the MCP server,
mcp_server/http.py); websockets go through the
origin check (ALLOWED_HOSTS) and the session/auth middleware to the consumers in accelopt_site/routing.py.
"""

from __future__ import annotations

import gc
import os
import sys

from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelopt_site.settings")
# Every ACCELOPT_* setting checked before serving: a bad value stops daphne with the list of problems and the
# accepted values, instead of failing a page later (accelopt_site/config_check.py).
from accelopt_site.config_check import exit_if_misconfigured  # noqa: E402

# Django must be set up before anything imports models (the consumers do, through routing).
try:
    django_http_application = get_asgi_application()
except ImproperlyConfigured as error:  # a bad value settings.py reads itself: said plainly, no traceback
    sys.exit(f"AccelOpt Studio cannot start: invalid configuration: {error}")
exit_if_misconfigured("AccelOpt Studio")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from accelopt_site.health import HealthzFront  # noqa: E402
from accelopt_site.routing import websocket_urlpatterns  # noqa: E402
from accelopt_site.sync_threads import KeptSyncThreads  # noqa: E402
from accelopt_site.uploads import UploadSizeLimit, cap_daphne_uploads  # noqa: E402
from accelopt_site.watchdog import start_server_watchdog  # noqa: E402
from mcp_server.http import McpFront  # noqa: E402
from optimizer.worker import EmbeddedWorkerMiddleware  # noqa: E402

# /static/ is served by WhiteNoise, a middleware in settings.MIDDLEWARE (compressed, far-future cached);
# behind a reverse proxy set ACCELOPT_SERVE_STATIC=0 and serve STATIC_ROOT there.

# The embedded run worker (optimizer.worker) starts with the server unless ACCELOPT_EMBEDDED_WORKER=0.
application = EmbeddedWorkerMiddleware(
    ProtocolTypeRouter(
        {
            # Over-sized uploads are refused before anything reads their body (accelopt_site/uploads.py), /mcp's
            # too; /mcp: the MCP server for coding agents (mcp_server/http.py), before Django's URL routing;
            # Django's sync code runs on kept threads (accelopt_site/sync_threads.py).
            "http": UploadSizeLimit(McpFront(HealthzFront(KeptSyncThreads(django_http_application)))),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)

# The watchdog (accelopt_site/watchdog.py) beats on daphne's loop, scheduled as the embedded worker is; only
# a process that runs that loop (the server) starts it, never tests or management commands importing this.
_daphne_loop = getattr(sys.modules.get("daphne.server"), "twisted_loop", None)
if _daphne_loop is not None:
    _daphne_loop.call_soon_threadsafe(start_server_watchdog)
    cap_daphne_uploads()  # an over-sized upload is refused as its headers arrive (accelopt_site/uploads.py)
    # Everything imported so far lives as long as the server: out of the collector's sight, a full collection
    # (which stops every thread, the event loop's too) no longer walks it: with this module imported, ~170,000
    # objects, gc.collect() took 0.25 s before and under 1 ms after (2-core VM, load 17); such pauses stretch
    # when the CPU is busy.
    gc.freeze()
