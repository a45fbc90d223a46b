"""Writes of the OpenAI-compatible endpoint: one chat completion is one run of kind `openai`.

`completion_start` resolves the agent the caller named as `model`, refuses a credential in
the caller's messages and starts the run through the one lifecycle (`run_start`: recorded,
gated, billed on success, with a live session); `completion_execute` runs the agent loop on
the composed prompt (the agent's instructions first, then the caller's messages; the agent's
own tools run here, the caller's `tools` come back as `tool_calls`) and finishes the run
(`run_execute_started` → `run_finish`). Org context required.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from django.conf import settings

from agents.execution import RunListener, run_span
from runs.drive import Steps, drive
from agents.execution.service import run_execute_started_steps
from agents.approval_rules import has_rules
from agents.models import Agent
from runs.models import Run
from runs.lifecycle import run_start
from runs.request import RunRequest
from agents_site.schemas import scan_caller_text
from agents_site.vocabulary import ChatRole, RunKind
from openai_api.errors import ApprovalUnsupported
from openai_api.selectors import model_get
from openai_api.wire import CompletionRequest
from tenancy.principal import Principal


@dataclass
class StartedCompletion:
    """A completion whose run is `running`: the run, the agent as the loop sees it, its prompt and client tools."""

    run: Run
    agent: Agent
    prompt: list[dict]
    client_tools: list[dict]
    model: str


def completion_prompt(agent: Agent, request: CompletionRequest) -> list[dict]:
    """Return the prompt of one call: the agent's instructions (role `AGENTS_INSTRUCTIONS_ROLE`,
    `system` by default; omitted when empty), then the caller's messages as sent.

    Example: instructions "Be brief", messages `[user "hi"]` → `[system "Be brief", user "hi"]`.
    """
    prompt: list[dict] = []
    instructions = (agent.instructions or "").strip()
    if instructions:
        role = ChatRole.USER if settings.AGENTS_INSTRUCTIONS_ROLE == "user" else ChatRole.SYSTEM
        prompt.append({"role": str(role), "content": instructions})
    prompt.extend(dict(message) for message in request.messages)
    return prompt


def completion_agent(agent: Agent, request: CompletionRequest) -> Agent:
    """Return `agent` as this call runs it: an unsaved copy whose generation settings
    (`max_tokens`, `temperature`, `top_p`) are the caller's where the caller sent them, the
    agent's otherwise, and whose `gateway_options` are the caller's pass-through fields. The loop passes an agent's generation settings to the gateway (capped by
    `AGENTS_MAX_OUTPUT_TOKENS`) where it supports them."""
    effective = copy.copy(agent)
    if request.max_tokens is not None:
        effective.max_tokens = request.max_tokens
    if request.temperature is not None:
        effective.temperature = request.temperature
    if request.top_p is not None:
        effective.top_p = request.top_p
    # The caller's own OpenAI fields (response_format, tool_choice, stop, seed, user…) reach the
    # gateway unchanged on every completion of the call (`agents.inference.chat_completion`).
    effective.gateway_options = dict(request.passthrough)
    return effective


def completion_start(*, principal: Principal, request: CompletionRequest, request_id: str = "") -> StartedCompletion:
    """Start the run of one chat completion; return it with what `completion_execute` needs.

    In order: the agent named by `request.model` (name or id) that the key may use (404
    `model_not_found`) → an agent with approval rules is refused (400 `approval_unsupported`) → no credential in any message, in the caller's tool definitions or in a
    field passed to the gateway (422 `secret_in_transcript`, masked findings naming the field) → `run_start` (a `RunRequest` of kind `openai`): an external agent
    (409 `agent_external`), inference configured (503), the balance gate with
    `AGENTS_OPENAI_FEE_CENTS` (402 / 503), then the `running` row and its session. The run's
    input is the last user message. Nothing is stored or billed when any step refuses.
    """
    agent = model_get(principal=principal, ref=request.model, listed_only=False)
    if has_rules(agent):
        # An OpenAI client has no way to be asked and answer later (a completion is one request).
        raise ApprovalUnsupported(agent.name)
    # Every text the caller wrote, with the one scanner of every caller-written field on both
    # APIs (`scan_caller_text`, as POST /v1/agents/chat): every message whatever its role (its
    # name, tool calls and their arguments), the caller's tool definitions (they reach the model
    # as its system text does) and the fields passed to the gateway unchanged (`stop`, `user`,
    # a `response_format` schema, `tool_choice`). Nothing carrying a credential is sent to a
    # model through us; the findings name the field.
    scan_caller_text({"messages": request.messages, "tools": request.tools, **request.passthrough,
                      **({"metadata": request.metadata} if request.metadata else {})})
    run = run_start(RunRequest(kind=RunKind.OPENAI, agent=agent, input=request.input_text(), actor=principal.actor,
                               request_id=request_id, executor_here=True, metadata=request.metadata))
    return StartedCompletion(run=run, agent=completion_agent(agent, request), prompt=completion_prompt(agent, request),
                             client_tools=request.tools, model=agent.name)


def completion_execute(started: StartedCompletion, *, listener: RunListener | None = None) -> Run:
    """Execute a started completion's run under its `agent.run` span and finish it; return the run.

    The run ends `ok` (its `output`, and `ops` when the agent called the caller's tools) or
    `error` (its `error`); either way it is recorded and its session closed, and only an `ok`
    run is debited. `listener` hears the reply as it is written (streaming). Blocks while the
    model writes (`completion_steps` is the same as run steps).
    """
    return drive(completion_steps(started, listener=listener))


def completion_steps(started: StartedCompletion, *, listener: RunListener | None = None) -> Steps[Run]:
    """`completion_execute` as run steps (`runs.drive`): what a request's event loop awaits."""
    run = started.run
    with run_span(run_id=run.id, agent_name=started.agent.name, actor=run.actor, model=started.agent.model,
                  kind=RunKind.OPENAI) as span:
        return (yield from run_execute_started_steps(run=run, agent=started.agent, span=span, prompt=started.prompt,
                                                     client_tools=started.client_tools, listener=listener))
