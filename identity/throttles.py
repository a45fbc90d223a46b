"""The per-user create rate limit of the identity API (DRF scoped throttle).

`AGENTS_IDENTITY_CREATE_RATE` (default `20/min`; DRF's `<n>/<sec|min|hour|day>`) bounds
`POST /v1/identity/agents` per user principal (org + subject), read live from settings. The
counts live in Django's cache: per process by default, shared with Redis when `REDIS_URL` is
set (`CACHES` in settings).
"""

import hashlib

from django.conf import settings
from rest_framework.throttling import ScopedRateThrottle


class IdentityCreateThrottle(ScopedRateThrottle):
    """Throttle scope `identity_create`, keyed by the caller's org and subject."""

    scope_attr = "throttle_scope"

    def get_rate(self):
        return getattr(settings, "AGENTS_IDENTITY_CREATE_RATE", "20/min") or None

    def allow_request(self, request, view):
        if getattr(view, self.scope_attr, None) is None:
            return True
        self.scope = getattr(view, self.scope_attr)
        self.rate = self.get_rate()
        if not self.rate:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super(ScopedRateThrottle, self).allow_request(request, view)

    def get_cache_key(self, request, view):
        principal = request.auth
        ident = f"{getattr(principal, 'org_slug', '')}/{getattr(principal, 'subject', '')}" if principal else self.get_ident(request)
        return self.cache_format % {"scope": self.scope, "ident": hashlib.sha256(ident.encode()).hexdigest()[:32]}
