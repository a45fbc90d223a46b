"""Authorize before a run, debit after it (spec 000 "The run is the billed unit"; reference §3.4).

The fee is `CLOUD_AGENT_FEE_CENTS` cents per successful run (default 100; 0 = free and
ungated; a negative value falls back to the default). The gate reads the ledger in the default
database BEFORE any inference: a balance below the fee is 402 `insufficient_balance`; a ledger
that cannot answer (any database error) is 503 `balance_unavailable` — fail-closed, never a
free run. The debit moves money once per run id (`billing.services.run_debit`), for the model
that answered. Both assert a validated principal (the actor) where the money moves.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from agents_site.errors import ApiError, Forbidden
from agents_site.vocabulary import ErrorCode, RunKind
from billing.models import LedgerEntry
from billing.queries import org_balance_cents
from billing.services import run_debit
from tenancy.models import Org
from tenancy.queries import org_by_slug

logger = logging.getLogger(__name__)

DEFAULT_FEE_CENTS = 100
DEBIT_ATTEMPTS = 3


class InsufficientBalance(ApiError):
    """402: the org's balance is below the run fee; nothing was executed or recorded."""

    status = 402
    code = ErrorCode.INSUFFICIENT_BALANCE
    default_message = "the org's balance cannot pay for this run; add credits"


class BalanceUnavailable(ApiError):
    """503: the ledger could not answer; nothing was executed or recorded (fail-closed)."""

    status = 503
    code = ErrorCode.BALANCE_UNAVAILABLE
    default_message = "billing is temporarily unavailable; the run was not started"


def run_fee_cents() -> int:
    """Return the fee of one successful run in cents (`CLOUD_AGENT_FEE_CENTS`; ≥ 0)."""
    fee = settings.CLOUD_AGENT_FEE_CENTS
    return DEFAULT_FEE_CENTS if fee is None or fee < 0 else int(fee)


#: The setting naming the fee of each kind of run that does not cost the run fee.
_KIND_FEE_SETTINGS = {
    RunKind.CHAT: "AGENTS_CHAT_FEE_CENTS",
    RunKind.OPENAI: "AGENTS_OPENAI_FEE_CENTS",
    RunKind.RESPONSES: "AGENTS_OPENAI_FEE_CENTS",  # the same endpoint family: a response costs what a chat completion does
    RunKind.CODING: "AGENTS_CODING_FEE_CENTS",
}


def fee_for_kind(kind: str, *, calls_model: bool = True) -> int:
    """Return the fee in cents that one successful run of `kind` (a `RunKind`) holds and is debited.

    Every fee rule of the platform is here (a run's policy asks, `runs.policies`):
    chat rounds, OpenAI-compatible calls and coding runs cost their own setting
    (`AGENTS_CHAT_FEE_CENTS`, `AGENTS_OPENAI_FEE_CENTS`, `AGENTS_CODING_FEE_CENTS`) when it is
    set to 0 or more; every other kind, and an unset one, costs `run_fee_cents()`. A run that
    calls no model at all (`calls_model=False`: a chat round a preset's handler answered with a
    fixed reply) costs 0 — nothing was inferred. A coding or routed run calls its model elsewhere
    (a worker, a machine) and costs its fee. Example: run fee 100, `AGENTS_CHAT_FEE_CENTS=5` →
    chat 5, scheduled 100, a fixed-reply chat round 0.
    """
    if not calls_model:
        return 0
    name = _KIND_FEE_SETTINGS.get(kind)
    value = getattr(settings, name, -1) if name else -1
    return run_fee_cents() if value is None or value < 0 else int(value)


def _require_actor(actor: str) -> None:
    if not (actor or "").strip():
        raise Forbidden("a validated principal is required to run an agent")


def balance_authorize(*, org_slug: str, actor: str, fee_cents: int | None = None, held_cents: int = 0) -> int:
    """Authorize one run of org `org_slug` costing `fee_cents`; return that fee in cents.

    `fee_cents` defaults to `run_fee_cents()`. `held_cents` is the sum of the fees the org's
    runs in flight already hold (`RunStatus.HOLDS_FEE`): the gate needs
    `balance − held ≥ fee`, so an org with 100 cents cannot start a second 100-cent run,
    nested or parallel, while the first is unpaid. Fee 0 → returns 0 without reading the
    ledger (ungated). Raises `Forbidden` (403) without an actor, `InsufficientBalance` (402,
    extras `feeCents`, `balanceCents`, `heldCents`) when the available balance is below the
    fee, `BalanceUnavailable` (503) when the ledger cannot be read.
    """
    _require_actor(actor)
    fee = run_fee_cents() if fee_cents is None else max(int(fee_cents), 0)
    if fee == 0:
        return 0
    try:
        balance = org_balance_cents(org_slug=org_slug)
    except DatabaseError as exc:
        logger.error("ledger unavailable for %s: %s", org_slug, exc)
        raise BalanceUnavailable() from exc
    if balance is None:
        raise BalanceUnavailable("billing has no account for this org; the run was not started")
    held = max(int(held_cents), 0)
    if balance - held < fee:
        raise InsufficientBalance(feeCents=fee, balanceCents=balance, **({"heldCents": held} if held else {}))
    return fee


def run_charge(*, org_slug: str, run_id: str, cents: int, model: str, actor: str, request_id: str = "") -> LedgerEntry | None:
    """Debit one successful run: `cents` from org `org_slug`, attributed to `model` and `actor`.

    Idempotent per run id (a repeat moves no money and returns None). A ledger error is retried
    (3 attempts); if it persists it is logged and None is returned — the run already happened
    and stays recorded; `billing.services.run_debit` can be replayed for its id later.
    Raises `Forbidden` (403) without an actor.
    """
    _require_actor(actor)
    if cents <= 0:
        return None
    retrying = Retrying(
        stop=stop_after_attempt(DEBIT_ATTEMPTS),
        wait=wait_exponential(multiplier=0.05, max=0.5),
        retry=retry_if_exception_type(DatabaseError),
        reraise=True,
    )
    try:
        for attempt in retrying:
            with attempt:
                org = org_by_slug(org_slug)
                if org is None:
                    raise Org.DoesNotExist(org_slug)
                return run_debit(org=org, run_id=run_id, cents=cents, model=model, actor=actor, request_id=request_id)
    except (DatabaseError, Org.DoesNotExist):
        logger.exception("debit of run %s (%s cents, org %s) failed; replay run_debit for it", run_id, cents, org_slug)
    return None
