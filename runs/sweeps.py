"""Per-org sweeps run by the minute's `agents: sweep` task: the run machinery's own and each kind's.

`approvalsExpired` ends the runs whose approval requests timed out (`runs.approvals`); a kind
with work to finish on a clock (routed runs whose machine never reported) says so in its
`RunPolicy.sweep`, counted as `<kind>Expired`. This layer runs them for every org without
importing the app that owns the kind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from runs.approvals import approvals_sweep
from runs.policies import run_policies
from tenancy import stores

logger = logging.getLogger(__name__)


def _sweepers() -> dict[str, Callable[[], list]]:
    """Return `{name: sweeper}`: each kind's `sweep` as `<kind>Expired`, then `approvalsExpired`."""
    sweepers = {f"{policy.kind}Expired": policy.sweep for policy in run_policies() if policy.sweep is not None}
    return {**sweepers, "approvalsExpired": approvals_sweep}


def org_sweeps_run() -> dict[str, int]:
    """Run every sweeper for every org; return `{name: how many it ended}`.

    An org whose store fails is logged and skipped; one sweeper's fault never stops another.
    """
    sweepers = _sweepers()
    counts = {name: 0 for name in sweepers}
    for slug in stores.existing_org_slugs():
        for name, sweeper in sweepers.items():
            try:
                with stores.org_context(slug, create=False):
                    counts[name] += len(sweeper() or [])
            except Exception:
                logger.exception("sweep %s failed for org %s", name, slug)
    return counts
