"""Resolve the principal once per request and act for its org while the view runs."""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async

from agents_site.errors import ApiError, error_response
from tenancy import stores
from tenancy.principal import resolve_principal, scope_refusal


class PrincipalMiddleware:
    """Set `request.principal` (or `request.principal_error`) and the current org.

    Under the ASGI server the principal also arms the request's revocation guard: revoking its
    key, its membership or its org closes the request while it is open (`tenancy.revocation`).

    An API key limited to some paths (`ApiKey.scope`) used on another path gets
    `principal_error` 403, so every API of the site refuses it the way it refuses a bad key.

    The current org (a ContextVar) is set and reset in this one frame, around the view. A
    streaming view whose body runs after the view returns (SSE) sets it again itself.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    @staticmethod
    def _resolve(request) -> str | None:
        request.principal = None
        request.principal_error = None
        try:
            request.principal = resolve_principal(request)
        except ApiError as exc:
            request.principal_error = exc
            return None
        refusal = scope_refusal(request.principal, request.path)
        if refusal is not None:  # a limited key outside its paths: refused like a bad credential
            request.principal, request.principal_error = None, refusal
            return None
        principal = request.principal
        arm = getattr(request, "agents_revocation", None)  # the server's revocation guard (server.asgi)
        if arm is not None and principal is not None:
            arm(principal)
        if principal is not None and principal.org_slug:
            try:
                stores.open_store(principal.org_slug)
                stores.check_available(principal.org_slug)  # 503 `restoring` while restore_org runs
            except ApiError as exc:
                # An answer, not a fault: rendered here, so it is never logged as an uncaught
                # exception with a traceback (issue 51); the outermost middleware shapes it for
                # its path (`server.middleware`) and logs it in one line.
                request.agents_refusal = exc
                return None
            return principal.org_slug
        return None

    @staticmethod
    def _refused(request):
        refusal = getattr(request, "agents_refusal", None)
        if refusal is None:
            return None
        response = error_response(refusal)
        response.agents_render_for_path = True
        return response

    def __call__(self, request):
        if self.async_mode:
            return self.__acall__(request)
        slug = self._resolve(request)
        if slug is None:
            return self._refused(request) or self.get_response(request)
        token = stores.set_current(slug)
        try:
            return self.get_response(request)
        finally:
            stores.reset_current(token)

    async def __acall__(self, request):
        slug = await sync_to_async(self._resolve)(request)
        if slug is None:
            return self._refused(request) or await self.get_response(request)
        token = stores.set_current(slug)
        try:
            return await self.get_response(request)
        finally:
            stores.reset_current(token)
