"""Routed runs: `POST /v1/agents/{ref}/run` with `"targetId"` hands the run to a machine.

The run lifecycle with the machine in place of the gateway (DESIGN §4, §6; reference §2.4):
`run_replay` then `run_starting` (kind `routed`: no inference needed here, a replayed key
answers a run in flight) check the input (400), replay a key (409s), and — after the dispatch
gate (404 unknown machine; 409 `target_unavailable`: offline, draining, keyless, not claimed
within 90 s) — gate the balance (402 / 503) and, in
one transaction of the org's store, records the run `running`, opens its root session (naming
the machine) and puts the offer in the (org, target) mailbox → 202 with the run. The machine
claims the offer, runs the agent loop against its own gateway, streams its steps into the
session and reports; the report finishes the run (`targets.settle`). The offer carries no
credential. Org context required.
"""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings

from agents.models import Agent
from runs.models import Run
from runs.lifecycle import check_input, run_replay, run_starting
from runs.request import RunRequest
from agents_site.vocabulary import RunKind
from targets import mailbox
from targets.selectors import target_dispatchable


def routed_payload(*, agent: Agent, text: str) -> dict:
    """Return what the machine's claim receives for a run of `agent` on `text` (no credential).

    `{agent: {name, model, instructions, tools}, approval: {tools?}, input, instructionsRole,
    toolRounds, toolCallTimeoutSeconds, timeoutSeconds}` — the same knobs the server's own loop
    reads; `approval` is the agent's rules as the run started (issue 28: the calls they name wait
    for a person, `targets.approvals`).
    """
    return {
        "agent": {"name": agent.name, "model": agent.model, "instructions": agent.instructions, "tools": list(agent.tools or [])},
        "approval": dict(agent.approval or {}),
        "input": text,
        "instructionsRole": settings.AGENTS_INSTRUCTIONS_ROLE,
        "toolRounds": settings.AGENTS_TOOL_ROUNDS,
        "toolCallTimeoutSeconds": settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS,
        "timeoutSeconds": settings.AGENTS_ROUTED_RUN_TIMEOUT_SECONDS,
    }


def routed_run_start(*, agent: Agent, input: str | None, target_id: str, actor: str, request_id: str = "", idempotency_key: str = "") -> Run:
    """Route one run of `agent` to machine `target_id`; return the run (`running`, → 202).

    A replayed idempotency key returns the earlier run (`run.replayed` True), in flight or
    not. Raises, with nothing recorded: `InvalidRequest` (400), `AgentExternal` /
    `IdempotencyMismatch` (409), `TargetNotFound` (404), `TargetUnavailable` (409 with the
    reason), `InsufficientBalance` (402), `BalanceUnavailable` (503), `Forbidden` (403, no actor).
    """
    text = check_input(input)
    request = RunRequest(kind=RunKind.ROUTED, agent=agent, input=text, actor=actor, request_id=request_id,
                         idempotency_key=idempotency_key, idempotency_scope=target_id)
    earlier = run_replay(request)  # a replayed key is answered before the dispatch gate (the machine may be gone)
    if earlier is not None:
        return earlier
    target = target_dispatchable(target_id=target_id)
    request = replace(request, session_fields={"target": target.id, "host": target.host})
    with run_starting(request) as run:
        if run.started_here:  # the offer commits with the run, or neither does
            mailbox.routed_offer(target_id=target.id, run_id=run.id, session_id=run.session_id,
                                 payload=routed_payload(agent=agent, text=text))
    return run
