"""django-q2 task entry points of the webhook engine (worker processes).

Plain arguments (an org slug, a channel name, delivery ids); each acts for its org only inside
`tenancy.stores.org_context(slug)` and is safe to run twice (attempts are claimed). Schedules
(`SCHEDULES`, installed by `manage.py ensure_schedules`):
`webhooks: deliveries` every minute (due retries of every channel), `webhooks: target sweep`
every minute (`target.offline`).
"""

from __future__ import annotations

import logging

from tenancy import stores
from webhooks import engine
from webhooks.events import target_status_sweep

logger = logging.getLogger(__name__)

#: This app's django-q2 schedules, name → (task, cron): `manage.py ensure_schedules` (the composition root) installs them.
SCHEDULES = {
    "webhooks: deliveries": ("webhooks.tasks.due_tick", "* * * * *"),
    "webhooks: target sweep": ("webhooks.tasks.target_sweep", "* * * * *"),
}


def deliver(org: str, channel_name: str, delivery_ids: list[str]) -> int:
    """Attempt deliveries `delivery_ids` of `channel_name` in org `org` (on the webhook threads); return how many."""
    return engine.dispatch(org, channel_name, list(delivery_ids))


def due_tick(channel_names: list[str] | None = None) -> dict:
    """Queue an attempt of every due delivery of every channel (or of `channel_names`) of every org; return counts."""
    done, failed = 0, 0
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                for ch in engine.channels():
                    if channel_names and ch.name not in channel_names:
                        continue
                    due = engine.deliveries_due(ch.name)
                    if due:
                        engine.enqueue(slug, ch.name, due)
                        done += len(due)
        except Exception:
            failed += 1
            logger.warning("webhook tick failed for org %s", slug, exc_info=True)
    return {"done": done, "failedOrgs": failed}


def target_sweep() -> dict:
    """Emit `target.offline` for every machine whose computed status changed, in every org; return counts."""
    done, failed = 0, 0
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                done += target_status_sweep()
        except Exception:
            failed += 1
            logger.warning("target sweep failed for org %s", slug, exc_info=True)
    return {"done": done, "failedOrgs": failed}
