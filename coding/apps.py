from django.apps import AppConfig
from django.conf import settings

from agents_site.vocabulary import RunKind
from coding.errors import CodingBusy


def max_in_flight() -> int:
    """Return how many coding runs an org may have in flight at once (`AGENTS_CODING_MAX_CONCURRENT`, read at each start)."""
    return settings.AGENTS_CODING_MAX_CONCURRENT


class CodingConfig(AppConfig):
    """Repositories and coding runs (each org's own store): POST /v1/agents/coding, /v1/agents/repos."""

    name = "coding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Record routed coding runs' reports like server runs (`targets.settle`); register the `coding` run policy."""
        from coding.routing import routed_coding_settled, routed_coding_summarise  # ready(): imports models, which load after apps.py
        from targets.settle import register_report_handler  # ready(): imports models, which load after apps.py

        register_report_handler(summarise=routed_coding_summarise, settled=routed_coding_settled)

        from runs.policies import InFlightLimit, RunPolicy, register_run_policy  # ready(): imports models, which load after apps.py

        # A coding run here calls this deployment's gateway (one routed to a machine, `targetId`, does
        # not: its request names the target); at most AGENTS_CODING_MAX_CONCURRENT per org in flight
        # (429 coding_busy). Its queued runs go to coding's own task (`coding.services.coding_dispatch`),
        # and it never waits for approval (an agent with approval rules is refused).
        register_run_policy(RunPolicy(kind=RunKind.CODING, in_flight_limit=InFlightLimit(
            maximum=max_in_flight, error=CodingBusy)))
