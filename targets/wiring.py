"""What the targets app registers with the apps below it (each registry is listed in `server/registries.py`).

Imported once, from `TargetsConfig.ready()`: its imports reach models, which load after `apps.py`.
"""

from agents_site.vocabulary import RunKind
from runs.hooks import register_run_finishing_handler
from runs.policies import RunPolicy, register_run_policy
from runs.routed import register_routed_start
from runs.sweeps import register_sweep
from sessions.control import register_command_handler
from targets.approvals import routed_resume_offer, routed_run_finishing
from targets.mailbox import routed_expire, routed_stop_command
from targets.routing import routed_run_start


def wire() -> None:
    """Reach the lower layers' registries: routed runs, stops of unclaimed offers, the unreported-run sweep,
    approvals of routed runs (issue 28 item 7), the `routed` run policy."""
    register_routed_start(routed_run_start)
    register_command_handler(routed_stop_command)
    register_sweep("routedExpired", routed_expire)
    register_run_finishing_handler(routed_run_finishing)  # a waiting routed run that ends: its offer withdrawn
    # The machine infers (no gateway needed here); a replayed key answers the run in flight (202);
    # answered approvals hand the run back to its machine (offered again), not to the server's resume task.
    register_run_policy(RunPolicy(kind=RunKind.ROUTED, needs_inference=False, replays_in_flight=True,
                                  resume_elsewhere=routed_resume_offer))
