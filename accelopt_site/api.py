"""The one NinjaAPI, mounted at /api/. Each app contributes a Router from its own api.py.

Endpoints call services and let their exceptions through; the handlers below turn them into the API's
error answers, one JSON body for all of them: {"detail": "<what went wrong>"}.

    Http404             404  (no such object, or one the caller may not see)
    PermissionDenied    403  (the caller may see it but not change it)
    ValidationError     400  (Django's: bad input a service refused; its messages joined by spaces)
    ValueError          400  (bad input a service or a parser refused, e.g. a malformed problem address)

ninja's own answers keep their status: 401/403 from the auth classes, 422 for a request body or query that
does not fit its schema (its detail a message naming each wrong or unknown field; the list in "errors"), and
HttpError(status, message) for anything an endpoint raises itself. A body over DATA_UPLOAD_MAX_MEMORY_SIZE is
a 413 with both sizes, and a path under /api/ that names no endpoint a 404 (`unknown_endpoint`): JSON too.
"""

from __future__ import annotations

import pydantic
from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Schema
from ninja.errors import ValidationError as SchemaError

from accounts.auth import api_auth
from accounts.roles import roles_of
from benchmark.api import router as benchmark_router
from benchmark.sizes import human_bytes
from campaigns.api import router as campaigns_router
from mcp_server.api import router as mcp_router
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
api.add_router("", campaigns_router, tags=["campaigns"])
api.add_router("", mcp_router, tags=["mcp"])


def _error(request: HttpRequest, status: int, detail: str) -> HttpResponse:
    return api.create_response(request, {"detail": detail}, status=status)


@api.exception_handler(Http404)
def not_found(request: HttpRequest, error: Http404) -> HttpResponse:
    # The services' messages name what is missing ("no run with id 7"); ninja's default says only "Not Found".
    return _error(request, 404, str(error) or "Not Found")


@api.exception_handler(PermissionDenied)
def forbidden(request: HttpRequest, error: PermissionDenied) -> HttpResponse:
    return _error(request, 403, str(error) or "Forbidden")


@api.exception_handler(ValidationError)
def invalid(request: HttpRequest, error: ValidationError) -> HttpResponse:
    return _error(request, 400, " ".join(error.messages))


@api.exception_handler(SchemaError)
def unfit(request: HttpRequest, error: SchemaError) -> HttpResponse:
    problems = []
    for item in error.errors:
        where = ".".join(str(part) for part in item.get("loc", ()) if part not in ("body", "payload", "query", "form"))
        if item.get("type") == "extra_forbidden":
            problems.append(f"unknown field {where!r}")
        else:
            problems.append(f"{where or 'request'}: {item.get('msg', 'invalid')}")
    return api.create_response(request, {"detail": "; ".join(problems), "errors": error.errors}, status=422)


@api.exception_handler(RequestDataTooBig)
def too_big(request: HttpRequest, error: RequestDataTooBig) -> HttpResponse:
    limit = human_bytes(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    length = request.META.get("CONTENT_LENGTH", "")
    size = f"the request body is {human_bytes(int(length))}" if length.isdigit() else "the request body is too large"
    return _error(request, 413, f"{size}; the limit is {limit}")


@api.exception_handler(SuspiciousOperation)
def refused(request: HttpRequest, error: SuspiciousOperation) -> HttpResponse:
    return _error(request, 400, str(error) or "Bad Request")


def unknown_endpoint(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any /api/ path no router answers: a JSON 404 (Django's own would be an HTML page)."""
    return JsonResponse({"detail": f"no API endpoint {request.path}; the endpoints are listed at /api/docs"}, status=404)


@api.exception_handler(ValueError)
def bad_value(request: HttpRequest, error: ValueError) -> HttpResponse:
    # pydantic's ValidationError is a ValueError too; one escaping here is a response that does not fit its
    # schema (ninja turns bad *input* into a 422 before the endpoint runs): our bug, so a 500, not a 400.
    if isinstance(error, pydantic.ValidationError):
        raise error
    return _error(request, 400, str(error))


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
