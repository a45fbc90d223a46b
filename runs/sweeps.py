"""Per-org sweeps of higher layers, run by the minute's `agents: sweep` task.

A higher app with work to finish on a clock (targets: routed runs whose machine never
reported) registers a sweeper in its `AppConfig.ready()`; this layer runs it for every org
without importing that app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tenancy import stores

logger = logging.getLogger(__name__)

_sweepers: dict[str, Callable[[], list]] = {}


def register_sweep(name: str, sweeper: Callable[[], list]) -> None:
    """Register `sweeper()` under `name`: called in each org's context, it returns what it ended (a list)."""
    _sweepers[name] = sweeper


def org_sweeps_run() -> dict[str, int]:
    """Run every registered sweeper for every org; return `{name: how many it ended}`.

    An org whose store fails is logged and skipped; one sweeper's fault never stops another.
    """
    counts = {name: 0 for name in _sweepers}
    for slug in stores.existing_org_slugs():
        for name, sweeper in list(_sweepers.items()):
            try:
                with stores.org_context(slug, create=False):
                    counts[name] += len(sweeper() or [])
            except Exception:
                logger.exception("sweep %s failed for org %s", name, slug)
    return counts
