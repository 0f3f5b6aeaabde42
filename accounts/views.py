"""The signed-in user's own page: their roles and their API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.forms import TokenCreateForm
from accounts.models import ApiToken
from accounts.roles import ROLE_DESCRIPTIONS, roles_of
from accounts.services import create_token, revoke_token

PROFILE_TEMPLATE = "accounts/profile.html"


def _render_profile(
    request: HttpRequest, form: TokenCreateForm, new_secret: str | None = None, status: int = 200
) -> HttpResponse:
    roles = roles_of(request.user)
    context = {
        "roles": [(role, ROLE_DESCRIPTIONS[role]) for role in roles],
        "tokens": request.user.api_tokens.all(),
        "form": form,
        "new_secret": new_secret,
    }
    return render(request, PROFILE_TEMPLATE, context, status=status)


@login_required
@require_GET
def profile(request: HttpRequest) -> HttpResponse:
    return _render_profile(request, TokenCreateForm())


@login_required
@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _render_profile(request, form, status=400)
    new = create_token(request.user, form.cleaned_data["name"])
    # Rendered directly rather than redirected: the secret must not be parked in the session store.
    return _render_profile(request, TokenCreateForm(), new_secret=new.secret, status=201)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token = revoke_token(request.user, token_id)
    except ApiToken.DoesNotExist:
        raise Http404("No such API token among yours.") from None
    messages.success(request, f"Revoked the token “{token.name}”. Clients using it now get 401.")
    return redirect("accounts:profile")
