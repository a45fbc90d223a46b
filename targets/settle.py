"""Settle a routed run: turn the machine's report into the run's outcome and finish it.

The run lifecycle's `run_finish` records it like any other run (status, output or error, model,
tokens, tool calls, duration; the session's summary and end; a debit of the fee an `ok` run
held, once, for the model that answered). Settling is idempotent: only a run still `running`
moves. Org context required.

Higher apps add their own part through `register_report_handler` (from `AppConfig.ready`):
`summarise(*, run_id, result) -> dict | None` gives extra fields for the final `log` event
(and may record its own rows), `settled(*, run)` runs after the run is finished — the coding
app records a routed coding run's commits and push like a server run's this way.
"""

from __future__ import annotations

from runs.models import Run
from runs.lifecycle import Outcome, run_finish
from runs.tracing import ATTR_TARGET_ID
from agents_site.vocabulary import RunStatus

_RUNNING = frozenset({RunStatus.RUNNING})
_handlers: list[tuple] = []


def register_report_handler(*, summarise, settled=None) -> None:
    """Register `summarise(*, run_id, result) -> dict | None` and optional `settled(*, run)` for every settled report."""
    if (summarise, settled) not in _handlers:
        _handlers.append((summarise, settled))


def report_outcome(result: dict) -> Outcome:
    """Return the `Outcome` a clamped report (`targets.sanitize.clean_report`) describes.

    `result`: `{status, output, error, model, promptTokens, completionTokens, toolCalls,
    durationMs, …}`; a missing error of a failed run reads "the run failed on the machine".
    """
    ok = result.get("status") == RunStatus.OK
    return Outcome(
        status=RunStatus.OK if ok else RunStatus.ERROR,
        output=(result.get("output") or "") if ok else "",
        error="" if ok else (result.get("error") or "the run failed on the machine"),
        model=result.get("model") or "",
        attempts=1 if result.get("model") else 0,
        prompt_tokens=result.get("promptTokens"),
        completion_tokens=result.get("completionTokens"),
        tool_calls=result.get("toolCalls") or 0,
        duration_ms=int(result.get("durationMs") or 0) or None,
        finish_reason=result.get("finishReason") or "",
    )


def routed_run_settle(*, run_id: str, result: dict, target_id: str = "", from_statuses: frozenset = _RUNNING) -> Run | None:
    """Finish routed run `run_id` with the machine's `result`; return the run, or None if already settled.

    Only a run in `from_statuses` moves (a report: `running`; a withdrawal also ends one waiting for approval).

    A `stoppedCommand` of the report (clamped and masked by `clean_report`) goes in the summary
    `log` event as a server run's does: after a stop the session gets only the run's end."""
    summary: dict = {}
    if result.get("stoppedCommand"):  # a command the stop killed: kept with the run's end, never as a step
        summary["stoppedCommand"] = result["stoppedCommand"]
    for summarise, _ in _handlers:
        summary.update(summarise(run_id=run_id, result=result) or {})
    run = run_finish(run_id=run_id, outcome=report_outcome(result), from_statuses=from_statuses,
                     span_attributes={ATTR_TARGET_ID: target_id}, summary=summary or None)
    if run is not None:
        for _, settled in _handlers:
            if settled is not None:
                settled(run=run)
    return run
