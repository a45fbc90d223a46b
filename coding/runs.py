"""The one seam between coding runs and the run lifecycle, kept thin on purpose.

Coding runs start and finish through the platform's one run lifecycle
(`runs.lifecycle`); these three calls only adapt its arguments to the coding engine's.

- `coding_run_starting` → `run_starting` with a queued `coding` `RunRequest`: the kind's gate (inference
  here, the org's coding runs in flight), the balance gate counting the fees held by the org's runs in
  flight, the `Run` row (`kind=coding`, the fee
  billing sets for the kind, `queued`) and its session (`running`, `taskRunId`), in one
  serialised org-store transaction; the caller writes its own rows in the `with` body (same
  transaction) and hands the run to the task queue once it commits.
- `coding_run_begin` → `run_mark_running` (exactly one worker wins; a run the balance no longer
  covers ends "not started").
- `coding_run_finish` → `run_finish`: the outcome, the summary `log` event (with the coding
  fields), the session closed `done`/`error`, and the fee debited once for an `ok` run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractContextManager

from agents.models import Agent
from runs.models import Run
from runs.run_session import RunSession
from runs.lifecycle import Outcome, RunNotQueued, run_finish, run_mark_running, run_starting
from runs.request import RunRequest
from agents_site.errors import ApiError
from agents_site.vocabulary import RunKind, RunStatus

logger = logging.getLogger(__name__)

_QUEUED = frozenset({RunStatus.QUEUED})


def coding_run_starting(
    *,
    agent: Agent | None,
    agent_name: str,
    input: str,
    actor: str,
    request_id: str,
    session_fields: Mapping[str, str],
    target_id: str = "",
) -> AbstractContextManager[Run]:
    """Gate and record a queued coding run with its session; return the context that yields it.

    `with coding_run_starting(...) as run:` — `run_starting` with a queued `coding`
    `RunRequest`: the body writes the caller's rows in the run's transaction (the coding
    record; a routed run's offer). The `coding` kind's `RunPolicy` (`coding.apps`) gates it:
    503 `inference_unavailable` for a run here without a gateway (`target_id` "": not routed to
    a machine), 429 `coding_busy` at the org's in-flight limit, billing's fee for the kind.
    `session_fields` go to `session_create` (`repo`, `project`, `target`). Raises those, the gate's
    errors (402 `insufficient_balance`, 503 `balance_unavailable`, 403 without an actor) and
    whatever the body raises; then nothing is written. Org context required.
    """
    return run_starting(RunRequest(kind=RunKind.CODING, agent=agent, agent_name=agent_name, input=input, actor=actor,
                                   request_id=request_id, queued=True, session_fields=dict(session_fields),
                                   target_id=target_id))


def coding_run_begin(*, run_id: str) -> Run | None:
    """Move queued coding run `run_id` to `running`; return it, or None when it is not queued (or can no longer be paid)."""
    try:
        return run_mark_running(run_id=run_id)
    except RunNotQueued:
        return None
    except ApiError as exc:
        run_finish(run_id=run_id, outcome=Outcome.failed(f"not started: {exc.message}"), from_statuses=_QUEUED)
        return None


def coding_run_finish(
    *,
    run: Run,
    session: RunSession | None,
    status: str,
    output: str = "",
    error: str = "",
    model: str = "",
    attempts: int = 0,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    tool_calls: int = 0,
    summary: dict | None = None,
    finish_reason: str = "",
    span=None,
) -> Run:
    """Record the outcome of running coding run `run` through the lifecycle's `run_finish`; return the run.

    `span`: the run's `agent.run` span when it executed here (its step and tool spans' parent).

    A run someone else finished meanwhile (a stop before start, recovery) is left as it is.
    `summary` is merged into the final `log` event's payload. Org context required.
    """
    outcome = Outcome(status=status, output=output, error=error, model=model, attempts=attempts,
                      prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, tool_calls=tool_calls,
                      finish_reason=finish_reason)
    run_finish(run_id=run.id, outcome=outcome, session=session, summary=summary, span=span)
    run.refresh_from_db()
    return run
