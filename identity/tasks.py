"""django-q2 task entry points of the identity app (worker processes).

Plain arguments (an org slug, a delivery id); each acts for its org only inside
`tenancy.stores.org_context(slug)` and is safe to run twice (attempts are claimed).
Schedules (`SCHEDULES`, installed by `manage.py ensure_schedules`):
`identity: health probes` every 5 minutes,
`identity: retention` hourly.
"""

from __future__ import annotations

import logging

from tenancy import stores
from identity.delivery import delivery_attempt
from agents_site.vocabulary import WebhookChannel
from webhooks.tasks import due_tick
from identity.health import health_probe_all
from identity.messaging import envelopes_purge

logger = logging.getLogger(__name__)

#: This app's django-q2 schedules, name → (task, cron): `manage.py ensure_schedules` (the composition root) installs them.
SCHEDULES = {
    "identity: health probes": ("identity.tasks.health_probes", "*/5 * * * *"),
    "identity: retention": ("identity.tasks.retention", "17 * * * *"),
}


def deliver(org: str, delivery_id: str) -> str:
    """Make one attempt of delivery `delivery_id` of org `org`; return its status (or "skipped").

    Kept for tasks queued before the shared engine (`webhooks.tasks.deliver` queues new ones).
    """
    with stores.org_context(org, create=False):
        row = delivery_attempt(delivery_id=delivery_id)
        return row.status if row is not None else "skipped"


def _each_org(fn) -> dict:
    done, failed = 0, 0
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                done += fn(slug) or 0
        except Exception:
            failed += 1
            logger.warning("identity task failed for org %s", slug, exc_info=True)
    return {"done": done, "failedOrgs": failed}


def deliveries_tick() -> dict:
    """Queue an attempt of every due identity webhook delivery of every org; return counts.

    The engine's own tick (`webhooks.tasks.due_tick`, scheduled every minute) covers every channel.
    """
    return due_tick([str(WebhookChannel.IDENTITY)])


def health_probes() -> dict:
    """Probe the health_check_url of every identity agent of every org; return counts."""
    return _each_org(lambda slug: health_probe_all())


def retention() -> dict:
    """Delete envelopes and delivery logs older than AGENTS_ENVELOPE_RETENTION_DAYS in every org."""
    return _each_org(lambda slug: envelopes_purge())
