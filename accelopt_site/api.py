"""The one NinjaAPI, mounted at /api/. Each app contributes a Router from its own api.py.

Endpoints call services and let their exceptions through; the handlers below turn them into the API's
error answers, one JSON body for all of them: {"detail": "<what went wrong>"}.

    Http404             404  (no such object, or one the caller may not see)
    PermissionDenied    403  (the caller may see it but not change it)
    ValidationError     400  (Django's: bad input a service refused; its messages joined by spaces)
    ValueError          400  (bad input a service or a parser refused, e.g. a malformed problem address)
    QuotaExceeded       429  (a per-person quota, named in the message: accounts/quotas.py)

ninja's own answers keep their status: 401/403 from the auth classes, 422 for a request body or query that
does not fit its schema (its detail a message naming each wrong or unknown field; the list in "errors"), and
HttpError(status, message) for anything an endpoint raises itself. A body over DATA_UPLOAD_MAX_MEMORY_SIZE is
a 413 with both sizes, and a path under /api/ that names no endpoint a 404 (`unknown_endpoint`): JSON too.
"""

from __future__ import annotations

from typing import Any

import pydantic
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Schema
from ninja.errors import ValidationError as SchemaError
from ninja.openapi.schema import OpenAPISchema
from ninja.operation import Operation

from accelopt_site.uploads import too_big_message
from accounts.auth import ApiAuth, api_auth
from accounts.quotas import QuotaExceeded
from accounts.roles import roles_of
from benchmark.api import router as benchmark_router
from campaigns.api import router as campaigns_router
from mcp_server.api import router as mcp_router
from memory.api import router as memory_router
from optimizer.api import router as optimizer_router

_ERROR_BODY = {"application/json": {"schema": {
    "title": "Error", "type": "object", "properties": {"detail": {"title": "Detail", "type": "string"}},
    "required": ["detail"],
}}}
# The endpoints that queue work and so may meet a per-person quota (accounts/quotas.py).
_QUOTA_ENDPOINTS = {"create_kernel", "request_evaluation", "import_kernel_files", "import_flashinfer", "create_run",
                    "resume_run", "continue_run", "create_campaign"}
_WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class _Schema(OpenAPISchema):
    """ninja's schema, plus the answers every endpoint may give besides its own (the handlers below): so a
    client generated from it knows the 401, 403, 413, 422 and 429 bodies are {"detail": "..."} too."""

    def responses(self, operation: Operation) -> dict[int, Any]:
        responses = super().responses(operation)
        role = next((auth.role for auth in operation.auth_callbacks if isinstance(auth, ApiAuth) and auth.role), None)
        writes = bool(_WRITE_METHODS & set(operation.methods))
        extra = {422: "The query or body does not fit the schema; `detail` names each wrong or unknown field."}
        if operation.auth_callbacks:
            extra[401] = ("No credentials" if role or not all(getattr(a, "optional", False)
                                                                for a in operation.auth_callbacks)
                          else "A bad or revoked token (anonymous callers need none)") + "; `Authorization: Bearer <token>`."
        if role or writes:
            extra[403] = (f"Needs the {role} role" if role else "Not yours to change") + \
                "; or a session request without its CSRF token."
        if writes:
            extra[413] = "The body is over ACCELOPT_MAX_UPLOAD_BYTES."
        if (operation.operation_id or operation.view_func.__name__) in _QUOTA_ENDPOINTS:
            extra[429] = "A per-person quota is reached; `detail` names it (ACCELOPT_QUOTA_*)."
        for status, description in extra.items():
            responses.setdefault(status, {"description": description, "content": _ERROR_BODY})
        return responses


class StudioApi(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: dict[str, Any] | None = None) -> Any:
        if path_prefix is None:
            path_prefix = self.get_root_path(path_params or {})
        return _Schema(self, path_prefix)


api = StudioApi(
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


@api.exception_handler(QuotaExceeded)
def over_quota(request: HttpRequest, error: QuotaExceeded) -> HttpResponse:
    # A ValidationError (so pages show it as one), but not bad input: the caller may retry once work finishes.
    return _error(request, 429, " ".join(error.messages))


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
    length = request.META.get("CONTENT_LENGTH", "")
    return _error(request, 413, too_big_message(int(length) if length.isdigit() else None))


@api.exception_handler(SuspiciousOperation)
def refused(request: HttpRequest, error: SuspiciousOperation) -> HttpResponse:
    return _error(request, 400, str(error) or "Bad Request")


@csrf_exempt  # changes nothing; a token caller's POST must get this JSON 404, not Django's HTML CSRF page
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


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: under /api/ a JSON 403 like every other API error (no /api/ view should
    reach Django's CSRF check: ninja's are exempt and check it themselves for session callers); elsewhere
    Django's own page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"CSRF check failed: {reason}; send 'Authorization: Bearer <token>', or "
                                       "the X-CSRFToken header with a session"}, status=403)
    return django_csrf_failure(request, reason)
