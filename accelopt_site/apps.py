from __future__ import annotations

import numpy  # noqa: F401  (loaded here so that its OpenBLAS exists to be limited below)
from django.apps import AppConfig
from threadpoolctl import threadpool_limits

from engine import ast_lock


class AccelOptSiteConfig(AppConfig):
    """The project package is also an app so it can own site-wide commands (prepare) and checks."""

    name = "accelopt_site"
    verbose_name = "AccelOpt Studio site"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The server's own numpy work (comparing outputs) is small; OpenBLAS worker threads there only
        # oversubscribe two cores and, at fork or exit, meet OpenBLAS's shutdown handshake, which can hang the
        # process while another thread runs BLAS (docs/architecture.md, "Starting children"). One thread:
        # no workers to join. Children set the same through their environment (sandbox._THREAD_VARS).
        threadpool_limits(limits=1, user_api="blas")
        # Several threads parse kernels at once; CPython 3.11's AST converter cannot (engine/ast_lock.py).
        ast_lock.install()
