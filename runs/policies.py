"""What each kind of run owes and may do: one `RunPolicy` per `RunKind`, registered by its app.

The app that owns a kind registers its policy in `AppConfig.ready` (agents: `run`, `tool`,
`scheduled`; chat: `chat`; openai_api: `openai`; targets: `routed`; coding: `coding`), so the
run lifecycle reads the rules of a kind without importing the app above it. A kind nobody
registered fails loudly (`UnknownRunKind`) instead of running under a default.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from runs.request import RunRequest
from agents_site.vocabulary import RefusalAnswer
from billing.meter import fee_for_kind


class UnknownRunKind(ImproperlyConfigured):
    """A run of a kind no app registered a `RunPolicy` for (a deployment or code fault: 500)."""


@dataclass(frozen=True)
class RunPolicy:
    """The rules of one kind of run (a value; registered with `register_run_policy`).

    - `kind`: the `RunKind` it governs.
    - `needs_inference`: a run of the kind calls the gateway configured here (503
      `inference_unavailable` when none is); False when a machine or a worker's own check does.
    - `replays_in_flight`: a replayed `Idempotency-Key` answers the earlier run even while it
      is in flight (202; routed runs); otherwise only a queued request's replay does, and a
      synchronous run still running is 409 `idempotency_in_progress`.
    - `refusals`: `RefusalAnswer.RAISE` (the caller gets the 402/503 and nothing is recorded)
      or `RefusalAnswer.RECORD` (a finished `error` run "not started: …" is recorded and
      returned: a scheduled slot is never silently lost).
    The fee is billing's (`fee_cents`): no fee rule lives here.
    """

    kind: str
    needs_inference: bool = True
    replays_in_flight: bool = False
    refusals: RefusalAnswer = RefusalAnswer.RAISE

    def fee_cents(self, request: RunRequest) -> int:
        """Return the cents a run of `request` holds from its start and is debited when `ok` (`billing.meter.fee_for_kind`)."""
        return fee_for_kind(self.kind, calls_model=request.calls_model)

    def infers_here(self, request: RunRequest) -> bool:
        """Return True when a run of `request` needs this deployment's inference gateway."""
        return self.needs_inference and request.calls_model

    def answers_in_flight(self, request: RunRequest) -> bool:
        """Return True when a replay of `request`'s key answers an earlier run still in flight (queued runs, routed runs)."""
        return request.queued or self.replays_in_flight


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


def run_policy(kind: str) -> RunPolicy:
    """Return the registered `RunPolicy` of `kind`; raise `UnknownRunKind` when no app registered one."""
    policy = _policies.get(kind)
    if policy is None:
        raise UnknownRunKind(f"no run policy is registered for run kind {kind!r}; its app registers one in AppConfig.ready")
    return policy


def registered_kinds() -> frozenset[str]:
    """Return the kinds with a registered policy (a test checks every `RunKind` has one)."""
    return frozenset(_policies)
