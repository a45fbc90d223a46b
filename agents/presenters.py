"""Turn agent and run rows into their wire views (spec 003 JSON names)."""

from __future__ import annotations

from agents.modes import next_fire_utc
from agents.models import Agent
from runs.models import Run
from agents_site.vocabulary import ErrorCode, ExecutionMode, RunStatus
from agents_site.wire import compact, rfc3339


def overflowed(run: Run) -> bool:
    """Return True when a failed run's `error` is a context overflow: it starts with
    `context_length_exceeded` (`agents.inference.overflow_reason` writes it; issue 53: a 400 on every surface)."""
    return run.status == RunStatus.ERROR and (run.error or "").startswith(str(ErrorCode.CONTEXT_LENGTH_EXCEEDED))


def run_view(run: Run) -> dict:
    """Return the wire view of `run` (`createdAt` = when it finished, or was accepted;
    `startedAt` = when a worker or the request started executing it, absent while queued).

    `kind` says what started it (`RunKind`); `agent` is the name of the agent that ran, or of
    what drove a run no agent drives (a chat preset's id); `agentId` is absent for such a run.
    """
    return compact(
        {
            "id": run.id,
            "kind": run.kind,
            "agent": run.agent_name,
            "agentId": run.agent_id,
            "status": run.status,
            "model": run.model,
            "input": run.input,
            "output": run.output,
            "error": run.error,
            "durationMs": run.duration_ms,
            "attempts": run.attempts or None,
            "promptTokens": run.prompt_tokens,
            "completionTokens": run.completion_tokens,
            "toolCalls": run.tool_calls or None,
            "finishReason": run.finish_reason or None,
            "actor": run.actor,
            "traceId": run.trace_id,
            "sessionId": run.session_id,
            "startedAt": rfc3339(run.started_at),
            "createdAt": rfc3339(run.finished_at or run.created_at),
            "metadata": dict(run.metadata) if run.metadata else None,  # the caller's labels (chat completions' `metadata`)
        },
        # Token counts are null, never 0 or absent, when the gateway reported none (issue 31).
        keep=("id", "kind", "agent", "status", "model", "input", "durationMs", "createdAt", "promptTokens", "completionTokens"),
    )


def agent_view(agent: Agent, *, runs: int) -> dict:
    """Return the wire view of `agent` with `runs` as its run count."""
    next_run = None
    if agent.execution_mode == ExecutionMode.LONG_RUNNING and agent.schedule:
        next_run = rfc3339(next_fire_utc(agent.schedule, agent.timezone))
    return compact(
        {
            "id": agent.id,
            "name": agent.name,
            "model": agent.model,
            "description": agent.description,
            "tools": list(agent.tools or []),
            "approval": dict(agent.approval) if agent.approval else None,
            "status": agent.status,
            "executionMode": agent.execution_mode,
            "hosting": agent.hosting,
            "schedule": agent.schedule,
            "timezone": agent.timezone,
            "nextRunAt": next_run,
            "computeRef": agent.compute_ref,
            "serviceAccountId": agent.service_account_id,
            "maxTokens": agent.max_tokens,
            "contextWindow": agent.context_window,
            "temperature": agent.temperature,
            "topP": agent.top_p,
            "runs": runs,
            "createdAt": rfc3339(agent.created_at),
            "updatedAt": rfc3339(agent.updated_at),
        },
        keep=("id", "name", "model", "tools", "status", "executionMode", "hosting", "timezone", "runs", "createdAt", "updatedAt"),
    )


def agent_detail_view(agent: Agent, *, recent_runs: list[Run]) -> dict:
    """Return `agent_view` plus `instructions` and `recentRuns` (runs = len(recentRuns))."""
    view = agent_view(agent, runs=len(recent_runs))
    view["instructions"] = agent.instructions
    view["recentRuns"] = [run_view(r) for r in recent_runs]
    return view
