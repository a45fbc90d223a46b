"""Every registry of the project, with why it cannot be a plain import (issue 48 item 4).

A registry is how a lower app reaches code of a higher one without importing it: the higher app
fills it in its `AppConfig.ready()` (the way `django.contrib.admin` collects `ModelAdmin`s), and
import-linter cannot see the call. `tests/test_wiring.py` finds every registry in the code (its
counting rule: an undecorated module-level `def register_*` with a parameter) and fails unless the
set found is exactly the keys here, each with its reason. A new registry is added here with why a
downward import (or a `RunPolicy` field, for what differs by kind of run) cannot do.

Plain data, no imports: the composition root names what the apps wire, it does not call it.
"""

#: `module.function` → why the dependency cannot point down.
REGISTRIES: dict[str, str] = {
    # The ground and tenancy, below every app.
    "agents_site.schemas.register_text_scanner":
        "the ground's request schemas scan caller text with the sessions app's scanner, two layers above the ground",
    "tenancy.backups.base.register_event_clock":
        "a restore moves the sessions app's event clock, and sessions sits above tenancy",
    # sessions, below runs and every app that steers a run.
    "sessions.hooks.register_session_observer":
        "runs (approval guard, queued and waiting runs' commands, pending approvals), targets (a routed run's "
        "unclaimed offer) and webhooks (session.published) sit above sessions: one SessionObserver object per app",
    # agents, below identity and webhooks.
    "agents.hooks.register_agent_delete_handler":
        "identity cascades an agent's deletion to its profile and relations, and identity sits above agents",
    # runs, below every app that starts runs.
    "runs.policies.register_run_policy":
        "a run kind is one RunPolicy owned by the app above runs that starts that kind (decision 1480)",
    "runs.hooks.register_run_observer":
        "webhooks records a request's callback at a run's start and delivers run.finished and run.waiting, "
        "and webhooks sits above runs (one RunObserver object for every transition, as a kind is one RunPolicy)",
    "runs.hooks.register_inference_check":
        "the model gateway lives in agents above runs until inference is its own app below runs (item 3)",
    "runs.hooks.register_completion":
        "a run's Ask step waits on agents' completion until inference is its own app below runs (item 3)",
    "runs.hooks.register_tool_schema":
        "an approver's edited arguments are checked against a tool's schema from agents' tool registry above runs",
    # targets, below coding.
    "targets.settle.register_report_handler":
        "a routed coding run's report is summarised by coding, which sits above targets",
    # chat, below guide.
    "chat.presets.register_preset_handler":
        "the system preset's rounds are driven by guide's system agent, and guide sits above chat",
    # webhooks' engine, below identity.
    "webhooks.engine.register_channel":
        "identity's agent deliveries ride webhooks' one delivery engine, and identity sits above webhooks",
}
