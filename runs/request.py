"""What one run is asked to be: `RunRequest`, the value `run_start` / `run_starting` take.

A request carries only what varies from call to call (who asks, for what, with which key and
session fields); what a kind of run owes and may do — its fee, whether it needs inference,
whether a replayed key answers a run in flight, how a refusal answers — is its `RunPolicy`
(`runs.policies`), registered by the app that owns the kind. A request holds no
callables: a caller's writes that must commit with the run go in the body of
`with run_starting(request) as run:` (DESIGN §4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from django.db import models

#: An `agents.models.Agent` row (runs never imports the agents app: `.importlinter`).
Agent = models.Model


@dataclass(frozen=True)
class RunRequest:
    """One run to start, as a value (frozen: `dataclasses.replace` makes a changed copy).

    - `kind`: the `RunKind` (its `RunPolicy` must be registered, else `run_start` fails loudly).
    - `actor`: the billing actor `"<org>/<subject>"` (403 without one when the run costs a fee).
    - `input`: the run's text (None → ""; ≤ 128 KiB, no credential).
    - `agent`: the agent driving it, or None for a run no agent drives — then `agent_name` and
      `model` name it (a chat round of a preset).
    - `request_id`: the caller's request id, recorded on the run.
    - `idempotency_key`: an `Idempotency-Key` ("" none); `idempotency_scope` is added to the
      request's identity beside the agent (a routed run's target id).
    - `queued`: record it `queued` for a worker (else `running` now).
    - `calls_model`: False for a run that calls no model at all (a preset's fixed reply): it
      needs no inference and billing's fee for it is 0.
    - `parent_session_id`, `parent_run_id`, `depth`: a run called as a tool (its parent's).
    - `title`: the session's title (None → the start of the input); `session_fields`: extra
      `session_create` fields (`target`, `host`, `project`, `repo`…).
    - `executor_here`: the caller executes the run in this process at once (`RunLoop`): its
      session opens with this process's executor channel and the input as its first turn.
    - `metadata`: the caller's own string labels recorded on the run as sent (an OpenAI-compatible
      call's `metadata`, checked there: ≤ 16 pairs, keys ≤ 64 and values ≤ 512 characters).
    - `target_id`: the registered machine the run executes on ("" for this deployment): its
      model is called there, so it needs no inference gateway here (a coding run with
      `targetId`). Where the session records it is `session_fields["target"]`.
    """

    kind: str
    actor: str
    input: str | None = None
    agent: Agent | None = None
    agent_name: str = ""
    model: str = ""
    request_id: str = ""
    idempotency_key: str = ""
    idempotency_scope: str = ""
    queued: bool = False
    calls_model: bool = True
    parent_session_id: str = ""
    parent_run_id: str = ""
    depth: int = 0
    title: str | None = None
    session_fields: Mapping[str, str] = field(default_factory=dict)
    executor_here: bool = False
    target_id: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Return the name the run is recorded under: its agent's, else `agent_name`."""
        return self.agent.name if self.agent is not None else self.agent_name
