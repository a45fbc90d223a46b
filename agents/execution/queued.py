"""The agents' side of a background run: what a worker does with the queued run it took.

The run machinery (`runs.background`) takes the run's lease and calls its kind's
`RunPolicy.execute_queued`; this is it for `run` and `scheduled` (`agents.wiring`): executing means the agent loop.
"""

from __future__ import annotations

from agents.execution import run_execute_started, run_span
from agents.inference import inference_configured
from agents_site.errors import ApiError
from agents_site.vocabulary import AgentHosting, RunStatus
from runs.lifecycle import InferenceUnavailable, Outcome, RunNotQueued, run_finish, run_mark_running
from runs.models import Run

_QUEUED = frozenset({RunStatus.QUEUED})


def execute_queued(run: Run) -> None:
    """Execute queued `run` this worker took (its lease held): the agent loop, from `queued` to its end.

    The `RunPolicy.execute_queued` of the `run` and `scheduled` kinds (`agents.wiring`), called by
    `runs.background.run_execute_queued`. A run that can no longer start (its agent gone or
    external, no inference, the balance no longer covering it) ends `error` "not started: …"
    (never billed). Org context required.
    """
    agent = run.agent
    refusal = ""
    if agent is None:
        refusal = "the agent no longer exists"
    elif agent.hosting == AgentHosting.EXTERNAL:
        refusal = "the agent runs elsewhere (hosting: external)"
    elif not inference_configured():
        refusal = InferenceUnavailable.default_message
    if refusal:
        run_finish(run_id=run.id, outcome=Outcome.failed(f"not started: {refusal}"), from_statuses=_QUEUED)
        return
    try:
        started = run_mark_running(run_id=run.id)
    except RunNotQueued:
        return  # cancelled (or taken) between the read and the start
    except ApiError as exc:  # the balance no longer covers it
        run_finish(run_id=run.id, outcome=Outcome.failed(f"not started: {exc.message}"), from_statuses=_QUEUED)
        return
    with run_span(run_id=run.id, agent_name=started.agent_name, actor=started.actor, model=agent.model, kind=started.kind) as span:
        run_execute_started(run=started, agent=agent, span=span)
