"""Routed runs: `POST /v1/agents/{ref}/run` with `"targetId"` hands the run to a machine.

The run path's order, with the machine in place of the gateway (DESIGN §4, §6; reference §2.4):
input ≤ 128 KiB (400) → idempotency replay (409s) → the dispatch gate (404 unknown machine;
409 `target_unavailable`: offline, draining, keyless, not claimed within 90 s) → the balance
gate on the org (402 / 503; nothing recorded) → in one transaction of the org's store: the run
recorded `running`, its root session opened (naming the machine), the offer put in the
(org, target) mailbox → 202 with the run. The machine claims the offer, runs the agent loop
against its own gateway, streams its steps into the session and reports; the report settles
the run (`targets.settle`). The offer carries no credential. Org context required.
"""

from __future__ import annotations

from django.conf import settings
from django.db import router, transaction
from django.utils import timezone

from agents.execution import check_input
from agents.execution.service import runs_in_flight
from agents.idempotency import clean_key, replay, request_hash, reserve
from agents.ids import mint_id
from agents.models import Agent, Run
from agents.run_session import session_title
from agents_site.vocabulary import RunStatus, SessionStatus
from billing.meter import balance_authorize, run_fee_cents
from targets import mailbox
from targets.models import Target
from targets.selectors import target_dispatchable
from tenancy import stores


def routed_payload(*, agent: Agent, text: str) -> dict:
    """Return what the machine's claim receives for a run of `agent` on `text` (no credential).

    `{agent: {name, model, instructions, tools}, input, instructionsRole, toolRounds,
    toolCallTimeoutSeconds, timeoutSeconds}` — the same knobs the server's own loop reads.
    """
    return {
        "agent": {"name": agent.name, "model": agent.model, "instructions": agent.instructions, "tools": list(agent.tools or [])},
        "input": text,
        "instructionsRole": settings.AGENTS_INSTRUCTIONS_ROLE,
        "toolRounds": settings.AGENTS_TOOL_ROUNDS,
        "toolCallTimeoutSeconds": settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS,
        "timeoutSeconds": settings.AGENTS_ROUTED_RUN_TIMEOUT_SECONDS,
    }


def routed_run_start(*, agent: Agent, input: str | None, target_id: str, actor: str, request_id: str = "", idempotency_key: str = "") -> Run:
    """Route one run of `agent` to machine `target_id`; return the run (`running`, → 202).

    A replayed idempotency key returns the earlier run (`run.replayed` True). Raises, with
    nothing recorded: `InvalidRequest` (400), `IdempotencyMismatch`/`IdempotencyInProgress`
    (409), `TargetNotFound` (404), `TargetUnavailable` (409 with the reason),
    `InsufficientBalance` (402), `BalanceUnavailable` (503), `Forbidden` (403, no actor).
    """
    org_slug = stores.current_org()
    text = check_input(input or "")
    key = clean_key(idempotency_key)
    digest = request_hash(agent_id=f"{agent.id}@{target_id}", input=text) if key else ""
    if key:
        earlier = replay(key=key, digest=digest)
        if earlier is not None:
            earlier.replayed = True
            return earlier
    target = target_dispatchable(target_id=target_id)

    def authorize() -> None:
        held = runs_in_flight() if run_fee_cents() else 0
        balance_authorize(org_slug=org_slug, actor=actor, held_runs=held)

    return _record_and_offer(agent=agent, target=target, text=text, actor=actor, request_id=request_id, key=key, digest=digest,
                             authorize=authorize)


def _record_and_offer(*, agent: Agent, target: Target, text: str, actor: str, request_id: str, key: str, digest: str,
                      authorize) -> Run:
    """Gate (`authorize()`), record the run `running` with its session, and offer it — one transaction.

    The gate runs inside the org-store transaction that inserts the run (BEGIN IMMEDIATE on
    SQLite), so simultaneous runs of one org cannot both pass on the last fee.
    """
    from sessions.services import session_create

    now = timezone.now()
    run_id = mint_id("run")
    with transaction.atomic(using=router.db_for_write(Run)):
        if key:
            earlier = reserve(key=key, digest=digest, run_id=run_id)
            if earlier is not None:
                earlier.replayed = True
                return earlier
        authorize()
        session = session_create(agent=agent.name, actor=actor, title=session_title(text), status=SessionStatus.RUNNING,
                                 target=target.id, host=target.host)
        run = Run.objects.create(
            id=run_id, agent=agent, agent_name=agent.name, status=RunStatus.RUNNING, model=agent.model, input=text,
            actor=actor[:300], request_id=request_id[:128], session_id=session.id, created_at=now, started_at=now,
        )
        mailbox.routed_offer(target_id=target.id, run_id=run.id, session_id=session.id, payload=routed_payload(agent=agent, text=text))
    run.replayed = False
    return run
