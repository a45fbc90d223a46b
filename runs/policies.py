"""What each kind of run owes and may do: one `RunPolicy` per `RunKind`, registered once by its app.

A kind of run is one object (issue 48 item 2): everything that differs by kind — whether it
needs this deployment's inference gateway, how a replayed key and a refusal answer, how many may
be in flight, who executes it when queued, who resumes it after its approvals and how — is a
field of its `RunPolicy`. The app that owns the kind registers that policy in its
`AppConfig.ready` (agents: `run`, `tool`, `scheduled`; chat: `chat`; openai_api: `openai`;
targets: `routed`; coding: `coding`), so the run machinery reads the rules of a kind — and calls
the kind's own code — without importing the app above it. A kind nobody registered fails loudly
(`UnknownRunKind`) instead of running under a default. How to add a kind:
`docs/guides/run-kinds.md`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured
from django.db import models

from runs.models import Run
from runs.request import RunRequest
from agents_site.errors import ApiError
from agents_site.vocabulary import RefusalAnswer
from billing.meter import fee_for_kind

logger = logging.getLogger(__name__)

#: An `agents.models.Agent` row (runs never imports the agents app: `.importlinter`).
Agent = models.Model


class UnknownRunKind(ImproperlyConfigured):
    """A run of a kind no app registered a `RunPolicy` for (a deployment or code fault: 500)."""


@dataclass(frozen=True)
class InFlightLimit:
    """At most `maximum()` runs of one kind in flight (`queued` or `running`) per org.

    `maximum` is called at each start (it reads a setting, e.g. `AGENTS_CODING_MAX_CONCURRENT`);
    the start that would exceed it raises `error` (an `ApiError` class) with the message "the
    org has N <kind> runs in flight; wait for one to finish" — counted under the org's gate lock,
    so two simultaneous starts never both take the last slot (SQLite and PostgreSQL).
    """

    maximum: Callable[[], int]
    error: type[ApiError]


@dataclass(frozen=True)
class RunPolicy:
    """The rules of one kind of run (a value; registered once with `register_run_policy`).

    Starting (`runs.lifecycle.run_starting`):

    - `kind`: the `RunKind` it governs.
    - `needs_inference`: a run of the kind calls the gateway configured here, so it is refused
      503 `inference_unavailable` when none is — unless its request calls no model
      (`RunRequest.calls_model`) or executes on a registered machine (`RunRequest.target_id`).
      False when a machine always infers (routed runs).
    - `replays_in_flight`: a replayed `Idempotency-Key` answers the earlier run even while it
      is in flight (202; routed runs); otherwise only a queued request's replay does, and a
      synchronous run still running is 409 `idempotency_in_progress`.
    - `refusals`: `RefusalAnswer.RAISE` (the caller gets the 402/503 and nothing is recorded)
      or `RefusalAnswer.RECORD` (a finished `error` run "not started: …" is recorded and
      returned: a scheduled slot is never silently lost).
    - `in_flight_limit`: an `InFlightLimit` (coding runs: `AGENTS_CODING_MAX_CONCURRENT`, 429
      `coding_busy`), checked inside the start's serialised transaction; None: no limit beyond
      the balance.

    Executing and resuming (each `None` when the kind never does it):

    - `start(**fields) -> Run`: start a run of the kind that the agents' run route hands over
      (`runs.routed.routed_start`; routed runs: offered to a machine, `targets.routing`).
    - `execute(**fields) -> Run`: execute a run of the kind now, in this thread, and return it
      finished (an agent called as a tool: `agents.execution.run_execute`'s keywords). The tool
      backend that starts it sits below the executor whose loop resolves that backend's tools:
      the recursion goes through the kind's policy, not through an import cycle.

    - `execute_queued(run)`: execute a queued run a worker took (its lease held; `queued` still:
      the callee moves it `running` with `run_mark_running` and ends it with `run_finish`) —
      `runs.background.run_execute_queued`, for runs accepted with `RunRequest.queued`.
    - `resume(run) -> status`: carry on a `waiting` run whose approvals are all answered, here
      (the resume task, `runs.approvals.resume_answered`: no stop is recorded; the callee moves it
      `running` with `run_mark_resumed`). The agent loop's `agents.execution.resume.run_resume`.
    - `resume_elsewhere(run)`: instead of `resume`, hand the answered run to whoever executes it
      (a routed run: offered to its machine again), inside the transaction of the last answer;
      it must be idempotent. The run stays `waiting` until that executor takes it.
    - `resume_prompt(run, agent) -> messages | None`: the opening messages a resumed run is
      rebuilt on (a chat round: the conversation as the round opened); None: the agent's own.
    - `finishing(run)`: called inside a run's finish transaction, in a savepoint of its own, once
      the outcome is recorded (a routed run: its offer withdrawn). What it raises is logged.
    - `sweep() -> list`: called each minute in every org's context by the `agents: sweep` task
      (`runs.sweeps`), it ends what it finds overdue and returns it (routed runs whose machine
      never reported); the sweep counts it as `<kind>Expired`.
    - `resumed(run)`: called once a run resumed here has finished (a chat round: its reply
      posted to the conversation). What it raises is logged.

    The fee is billing's (`fee_cents`): no fee rule lives here.
    """

    kind: str
    needs_inference: bool = True
    replays_in_flight: bool = False
    refusals: RefusalAnswer = RefusalAnswer.RAISE
    in_flight_limit: InFlightLimit | None = None
    start: Callable[..., Run] | None = None
    execute: Callable[..., Run] | None = None
    execute_queued: Callable[[Run], None] | None = None
    resume: Callable[[Run], str] | None = None
    resume_elsewhere: Callable[[Run], object] | None = None
    resume_prompt: Callable[[Run, Agent], list[dict] | None] | None = None
    resumed: Callable[[Run], None] | None = None
    finishing: Callable[[Run], None] | None = None
    sweep: Callable[[], list] | None = None

    def __post_init__(self) -> None:
        if self.resume is not None and self.resume_elsewhere is not None:
            raise ImproperlyConfigured(f"run kind {self.kind!r}: a run resumes here (`resume`) or elsewhere "
                                       "(`resume_elsewhere`), not both")

    def fee_cents(self, request: RunRequest) -> int:
        """Return the cents a run of `request` holds from its start and is debited when `ok` (`billing.meter.fee_for_kind`)."""
        return fee_for_kind(self.kind, calls_model=request.calls_model)

    def infers_here(self, request: RunRequest) -> bool:
        """Return True when a run of `request` needs this deployment's inference gateway."""
        return self.needs_inference and request.calls_model and not request.target_id

    def answers_in_flight(self, request: RunRequest) -> bool:
        """Return True when a replay of `request`'s key answers an earlier run still in flight (queued runs, routed runs)."""
        return request.queued or self.replays_in_flight

    def opening_messages(self, run: Run, agent: Agent) -> list[dict] | None:
        """Return the messages resumed `run` is rebuilt on (`resume_prompt`'s), or None for the agent's own prompt."""
        return self.resume_prompt(run, agent) if self.resume_prompt is not None else None

    def after_resume(self, run: Run) -> None:
        """Call `resumed(run)` for a resumed run that finished, if the kind has one; log (never raise) what it raises."""
        if self.resumed is None:
            return
        try:
            self.resumed(run)
        except Exception:
            logger.exception("run %s: the resumed run's finished handler failed", getattr(run, "id", "?"))


_policies: dict[str, RunPolicy] = {}


def register_run_policy(policy: RunPolicy) -> None:
    """Register the rules of `policy.kind` (from the owning app's `AppConfig.ready`).

    Registering the same policy again is a no-op; a different policy for a kind already
    registered raises `ImproperlyConfigured` (two apps cannot both own a kind).
    """
    current = _policies.get(policy.kind)
    if current is not None and current != policy:
        raise ImproperlyConfigured(f"run kind {policy.kind!r} already has a policy: {current!r}")
    _policies[policy.kind] = policy


def run_policies() -> list[RunPolicy]:
    """Return every registered `RunPolicy`, in registration order."""
    return list(_policies.values())


def run_policy(kind: str) -> RunPolicy:
    """Return the registered `RunPolicy` of `kind`; raise `UnknownRunKind` when no app registered one."""
    policy = _policies.get(kind)
    if policy is None:
        raise UnknownRunKind(f"no run policy is registered for run kind {kind!r}; its app registers one in AppConfig.ready")
    return policy


def registered_kinds() -> frozenset[str]:
    """Return the kinds with a registered policy (a test checks every `RunKind` has one)."""
    return frozenset(_policies)
