"""The one NinjaAPI, mounted at /api/. Each app contributes a Router from its own api.py."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import NinjaAPI, Schema

from accounts.auth import api_auth
from accounts.roles import roles_of
from benchmark.api import router as benchmark_router
from memory.api import router as memory_router
from optimizer.api import router as optimizer_router

api = NinjaAPI(
    title="AccelOpt Studio API",
    version="1",
    description=(
        "Problems, kernels, evaluations, optimization runs and the optimization memory. "
        "Authenticate with a personal token from your account page: `Authorization: Bearer <token>`."
    ),
    urls_namespace="api",
)
# Routers mount at the root so paths read /api/problems, /api/runs, …; each app owns its own names.
api.add_router("", benchmark_router, tags=["benchmark"])
api.add_router("", memory_router, tags=["memory"])
api.add_router("", optimizer_router, tags=["optimizer"])


class MeOut(Schema):
    username: str
    email: str
    roles: list[str]
    is_superuser: bool


@api.get("/me", auth=api_auth, response=MeOut, tags=["accounts"], summary="Who am I")
def me(request: HttpRequest) -> MeOut:
    user = request.auth
    return MeOut(
        username=user.get_username(), email=user.email, roles=roles_of(user), is_superuser=user.is_superuser
    )
