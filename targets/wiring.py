"""What the targets app registers with the apps below it (each registry is listed in `server/registries.py`).

Imported once, from `TargetsConfig.ready()`: its imports reach models, which load after `apps.py`.
"""

from agents_site.vocabulary import RunKind
from runs.policies import RunPolicy, register_run_policy
from sessions.hooks import SessionObserver, register_session_observer
from targets.approvals import routed_resume_offer, routed_run_finishing
from targets.mailbox import routed_expire, routed_stop_command
from targets.routing import routed_run_start


class RoutedSessions(SessionObserver):
    """A stop of a routed run's session no executor receives withdraws its unclaimed offer (`targets.mailbox`)."""

    def take_command(self, *, session, command: str, message: str | None) -> bool:
        return routed_stop_command(session=session, command=command, message=message)


def wire() -> None:
    """Reach the lower layers' registries: routed runs, stops of unclaimed offers, the unreported-run sweep,
    approvals of routed runs (issue 28 item 7), the `routed` run policy."""
    register_session_observer(RoutedSessions())
    # The machine infers (no gateway needed here); a replayed key answers the run in flight (202);
    # answered approvals hand the run back to its machine (offered again), not to the server's resume task;
    # a routed run that ends while waiting has its offer withdrawn; one whose machine never reports expires.
    register_run_policy(RunPolicy(kind=RunKind.ROUTED, needs_inference=False, replays_in_flight=True, start=routed_run_start,
                                  resume_elsewhere=routed_resume_offer, finishing=routed_run_finishing, sweep=routed_expire))
