"""Health probes of identity agents' `health_check_url` (spec 001), shown as the agent's health.

A GET with a `AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS` (5) timeout, redirects not followed, to
a destination the webhook rules allow: 2xx is `healthy`, anything else `unhealthy` with a
short reason. Run for every org by the `identity: health probes` schedule. Org context required.
"""

from __future__ import annotations

import httpx
from django.conf import settings
from django.utils import timezone

from agents_site.vocabulary import AgentHealth
from identity.destinations import DestinationRefused, check_destination
from identity.models import IdentityProfile


def probe(url: str) -> tuple[str, str]:
    """Return `(health, detail)` of one GET of `url`."""
    try:
        check_destination(url)
    except DestinationRefused as exc:
        return AgentHealth.UNHEALTHY, f"refused destination: {exc}"
    timeout = float(getattr(settings, "AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS", 5))
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            response = client.get(url, headers={"user-agent": "agents-identity-health/1"})
    except httpx.TimeoutException:
        return AgentHealth.UNHEALTHY, "timed out"
    except httpx.HTTPError as exc:
        return AgentHealth.UNHEALTHY, f"request failed: {type(exc).__name__}"
    if 200 <= response.status_code < 300:
        return AgentHealth.HEALTHY, f"answered {response.status_code}"
    return AgentHealth.UNHEALTHY, f"answered {response.status_code}"


def health_probe_all() -> int:
    """Probe every identity agent of the current org that has a health_check_url; return how many."""
    count = 0
    for profile in IdentityProfile.objects.exclude(health_check_url="").only("agent_id", "health_check_url"):
        health, detail = probe(profile.health_check_url)
        IdentityProfile.objects.filter(pk=profile.pk, health_check_url=profile.health_check_url).update(
            health=health, health_detail=detail[:300], health_checked_at=timezone.now()
        )
        count += 1
    return count
