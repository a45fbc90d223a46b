"""Health probes of identity agents' `health_check_url` (spec 001), shown as the agent's health.

A GET with a `AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS` (5) timeout, redirects not followed, to
a destination the webhook rules allow, through `toolkit.outbound` (the connection goes to the
address that was checked): 2xx is `healthy`, anything else `unhealthy` with a
short reason. Run for every org by the `identity: health probes` schedule. Org context required.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from agents_site.vocabulary import AgentHealth
from identity.destinations import webhook_policy
from identity.models import IdentityProfile
from toolkit import outbound

MAX_ANSWER_BYTES = 16 * 1024


def probe(url: str) -> tuple[str, str]:
    """Return `(health, detail)` of one GET of `url`."""
    timeout = float(getattr(settings, "AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS", 5))
    try:
        response = outbound.request(webhook_policy(), "GET", url, headers={"user-agent": "agents-identity-health/1"},
                                    timeout=timeout, max_bytes=MAX_ANSWER_BYTES)
    except outbound.Refused as exc:
        return AgentHealth.UNHEALTHY, f"refused destination: {exc}"
    except outbound.TimedOut:
        return AgentHealth.UNHEALTHY, "timed out"
    except outbound.Failed as exc:
        return AgentHealth.UNHEALTHY, f"request failed: {exc}"
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
