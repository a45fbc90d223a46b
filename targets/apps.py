from django.apps import AppConfig


class TargetsConfig(AppConfig):
    """Registered machines, claim keys and routed runs (each org's own store)."""

    name = "targets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Reach the lower layers' registries: routed runs, stops of unclaimed offers, the unreported-run sweep,
        approvals of routed runs (issue 28 item 7), the `routed` run policy."""
        from runs.routed import register_routed_start
        from runs.sweeps import register_sweep
        from sessions.control import register_command_handler
        from targets.mailbox import routed_expire, routed_stop_command
        from targets.routing import routed_run_start

        register_routed_start(routed_run_start)
        register_command_handler(routed_stop_command)
        register_sweep("routedExpired", routed_expire)
        from runs.hooks import register_run_finishing_handler
        from agents_site.vocabulary import RunKind
        from targets.approvals import routed_resume_offer, routed_run_finishing

        register_run_finishing_handler(routed_run_finishing)  # a waiting routed run that ends: its offer withdrawn

        from runs.policies import RunPolicy, register_run_policy

        # The machine infers (no gateway needed here); a replayed key answers the run in flight (202);
        # answered approvals hand the run back to its machine (offered again), not to the server's resume task.
        register_run_policy(RunPolicy(kind=RunKind.ROUTED, needs_inference=False, replays_in_flight=True,
                                      resume_elsewhere=routed_resume_offer))
