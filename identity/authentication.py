"""DRF authentication of the identity API: the user principal and the agent token.

* `UserPrincipalAuthentication` — the caller's principal exactly as `/v1/agents` resolves it
  (`tenancy.principal`: API key, gateway JWT, console session; the middleware resolved it
  already). A session caller must pass the CSRF check on unsafe methods. 403 otherwise.
* `AgentTokenAuthentication` — `Authorization: Bearer agt_…`, only on the routes spec 001
  marks "agent token". The view then acts for the token's org (`IdentityView.initial`).
"""

from __future__ import annotations

from rest_framework.authentication import BaseAuthentication, CSRFCheck

from agents_site.errors import Forbidden
from agents_site.vocabulary import PrincipalVia
from identity.tokens import TOKEN_PREFIX, authenticate_token
from tenancy.authenticate import org_principal

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _enforce_csrf(request) -> None:
    def dummy_get_response(request):  # pragma: no cover - never called
        return None

    check = CSRFCheck(dummy_get_response)
    check.process_request(request)
    reason = check.process_view(request, None, (), {})
    if reason:
        raise Forbidden("CSRF check failed")


class UserPrincipalAuthentication(BaseAuthentication):
    """Authenticate the user principal; `request.auth` is the `tenancy.principal.Principal`."""

    def authenticate(self, request):
        django_request = request._request
        principal = org_principal(django_request)
        if principal.via == PrincipalVia.SESSION and request.method not in SAFE_METHODS:
            _enforce_csrf(django_request)
        return (principal, principal)

    def authenticate_header(self, request):
        return None  # 403, never 401: the project's one answer for a missing principal


class AgentTokenAuthentication(BaseAuthentication):
    """Authenticate `Authorization: Bearer agt_…`; `request.auth` is an `identity.tokens.AgentCaller`."""

    def authenticate(self, request):
        header = request._request.META.get("HTTP_AUTHORIZATION", "")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token.startswith(TOKEN_PREFIX):
            raise Forbidden("an agent token (Authorization: Bearer agt_…) is required")
        caller = authenticate_token(token)
        return (caller, caller)

    def authenticate_header(self, request):
        return None
