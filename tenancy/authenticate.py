"""The one authenticator: who a request acts for, on every face of the API.

`tenancy.middleware.PrincipalMiddleware` resolves the caller's credential once per request (an API
key `Authorization: Bearer ak_…`, a gateway JWT or a console login: `tenancy.principal`) and
leaves `request.principal` or, for a refused credential, `request.principal_error`. Every face
reads it through this module and nowhere else (tests/test_one_error_builder.py fails on a view
that reads it by hand):

- `org_principal(request)`: the `/v1/agents` API (Ninja), the identity API (DRF) and its inbox
  stream, A2A's agent card and directory routes: the principal acting for an org, or the
  credential's own refusal / 403 `forbidden` (`require_org`).
- `bearer_principal(request, face=…)`: A2A's JSON-RPC endpoint and the MCP server take a bearer
  credential only (no console login, so no CSRF): 403 naming the face for a login.
- `bearer_principal(request, face=…, refused=InvalidApiKey)`: the OpenAI-compatible endpoints
  (chat completions, Responses) answer 401 in OpenAI's error object instead: `refused(message)`
  for a refused credential, `refused()` for none or a login, `refused("the credential acts for
  no org")` for one without an org.
"""

from __future__ import annotations

from collections.abc import Callable

from agents_site.errors import ApiError, Forbidden
from agents_site.vocabulary import PrincipalVia
from tenancy.principal import Principal, require_org


def org_principal(request) -> Principal:
    """Return the principal `request` acts for (an org's); raise its credential's refusal or 403 `Forbidden`."""
    error = getattr(request, "principal_error", None)
    if error is not None:
        raise error
    return require_org(getattr(request, "principal", None))


def bearer_principal(request, *, face: str, refused: Callable[..., ApiError] | None = None) -> Principal:
    """Return the org principal of `request`'s bearer credential (an API key or gateway JWT), never a login.

    `face` names the endpoint in the 403 a console login gets ("the MCP server"). With `refused`
    (an `ApiError` class taking an optional message), every refusal is `refused(…)` instead (see
    the module doc): OpenAI's 401 `invalid_api_key`.
    """
    if refused is None:
        principal = org_principal(request)
        if principal.via == PrincipalVia.SESSION:
            raise Forbidden(f"{face} takes a bearer credential: 'Authorization: Bearer ak_…' (an API key of the org)")
        return principal
    error = getattr(request, "principal_error", None)
    if error is not None:
        raise refused(error.message)
    principal = getattr(request, "principal", None)
    if principal is None or principal.via == PrincipalVia.SESSION:
        raise refused()
    if not principal.org_slug or not principal.subject:
        raise refused("the credential acts for no org")
    return principal
