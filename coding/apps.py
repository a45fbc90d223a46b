from django.apps import AppConfig


class CodingConfig(AppConfig):
    """Repositories and coding runs (each org's own store): POST /v1/agents/coding, /v1/agents/repos."""

    name = "coding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Record routed coding runs' reports like server runs (`targets.settle`); register the `coding` run policy."""
        from coding.routing import routed_coding_settled, routed_coding_summarise
        from targets.settle import register_report_handler

        register_report_handler(summarise=routed_coding_summarise, settled=routed_coding_settled)

        from runs.policies import RunPolicy, register_run_policy
        from agents_site.vocabulary import RunKind

        # The coding service checks inference itself (a routed coding run needs none here).
        register_run_policy(RunPolicy(kind=RunKind.CODING, needs_inference=False))
