"""One round of POST /v1/agents/chat: a `chat` run through the one run lifecycle (reference §8.1).

`chat_round_start` checks the request and starts the run: messages (400 "messages required",
roles, 128 KiB each), `agent` xor `preset` (400), the preset (400 "unknown preset: <id>"), a
credential in ANY caller text (422 `secret_in_transcript`), the agent (404), then
`run_starting` (a `chat` `RunRequest`) — external agent 409, inference 503, the balance gate
402/503 — in whose transaction this round also takes the conversation's lock (409 `conversation_busy`, or wait with
`multitaskStrategy: enqueue`) and stores the last user message. Nothing is stored or billed
when any check refuses; once the run has started, the user's message stays stored whatever
happens to the run.

A preset with a handler (`chat.presets.register_preset_handler`: the system agent's slash
commands and artifact responses) may answer a round itself: the handler is asked before the
run starts (its refusals store nothing), and a round it answers is still a `chat` run through
`run_starting`/`run_finishing` — recorded, with its session — but calls no model: its request
says `calls_model=False`, so it needs no inference and billing's fee for it is 0; its model
reads `fixed-reply`.

`chat_round_execute` runs the loop (`run_conclude_steps`: the agent's or preset's server tools
execute here as actions, the caller's and client-executed tools come back as ops), stores the
reply with its tool calls and releases the conversation. `chat_round_body` shapes the answer.

The prompt: `[system: preset prompt (or agent instructions) + "\\n\\n" + body.system]`, the
stored thread (at most `AGENTS_CHAT_HISTORY_CHARS` characters, oldest turns dropped first),
then the caller's messages. A `tool` turn is sent as a user turn starting "Tool result:" —
the tool-call ids of earlier rounds are not kept, and gateways refuse a tool message that
answers no call of the same request.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings

from agents import selectors as agent_selectors
from agents.execution import RunListener
from runs.drive import Steps, drive
from agents.execution.service import run_conclude_steps
from agents.models import Agent
from runs.models import Run
from runs.lifecycle import Outcome, run_finishing, run_starting
from runs.request import RunRequest
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ChatRole, FinishReason, MultitaskStrategy, RunKind, RunStatus
from chat import selectors, services
from chat.errors import ConversationBusy
from chat.presets import DEFAULT_PRESET, FixedReply, Preset, preset_get, preset_handler
from chat.validation import check_system, check_tools, clean_messages, last_user_message, refuse_credentials, title_from
from chat.models import Message

logger = logging.getLogger(__name__)

TOOL_RESULT_PREFIX = "Tool result:\n"
FIXED_MODEL = "fixed-reply"  # the `model` of a round a preset handler answered without a model


@dataclass
class RoundStart:
    """A started round: its running `run`, the conversation it holds, and what the loop needs."""

    run: Run
    conversation_id: str
    agent: Agent
    prompt: list[dict]
    client_tools: list[dict] = field(default_factory=list)
    fixed: FixedReply | None = None
    preset_id: str = ""
    subject: str = ""


class _ExpandingListener(RunListener):
    """Pass a round's frames on, the ops rewritten by the preset's handler first (once)."""

    def __init__(self, inner: RunListener | None, expand):
        self.inner, self.expand, self.expanded = inner, expand, None

    @property
    def streamed(self) -> bool:
        """Whether the gateway is asked streamed: as the inner listener says (`WholeAnswer`: not)."""
        return getattr(self.inner, "streamed", True)

    def rewrite(self, ops: list[dict]) -> list[dict]:
        if self.expanded is None:
            try:
                self.expanded = self.expand(ops)
            except Exception:  # a listener must not raise: the client gets the ops as the model gave them
                logger.exception("a preset handler failed to expand ops")
                self.expanded = list(ops)
        return self.expanded

    def delta(self, text: str) -> None:
        if self.inner is not None:
            self.inner.delta(text)

    def tool(self, action: dict) -> None:
        if self.inner is not None:
            self.inner.tool(action)

    def ops(self, ops: list[dict]) -> None:
        rewritten = self.rewrite(ops)
        if self.inner is not None:
            self.inner.ops(rewritten)


def _instructions_role() -> str:
    return ChatRole.USER if settings.AGENTS_INSTRUCTIONS_ROLE == ChatRole.USER else ChatRole.SYSTEM


def _wire(role: str, content: str) -> dict:
    """Return one turn as sent to the model (a `tool` turn becomes a labelled user turn)."""
    if role == ChatRole.TOOL:
        return {"role": ChatRole.USER, "content": TOOL_RESULT_PREFIX + content}
    return {"role": role, "content": content}


def compose_prompt(*, base: str, system: str, history: list, messages: list[dict]) -> list[dict]:
    """Return the round's messages: the system prompt (`base` + "\\n\\n" + `system`, either may be
    empty), the stored `history` (Message rows), then the caller's `messages`.

    Example: base "Be brief", system "Answer in French", no history, `[user "hi"]` →
    `[system "Be brief\\n\\nAnswer in French", user "hi"]`.
    """
    prompt: list[dict] = []
    text = "\n\n".join(part for part in (base.strip(), system.strip()) if part)
    if text:
        prompt.append({"role": _instructions_role(), "content": text})
    prompt.extend(_wire(m.role, m.content) for m in history)
    prompt.extend(_wire(m["role"], m["content"]) for m in messages)
    return prompt


def _driver(*, preset_id: str | None, agent_ref: str | None) -> tuple[Agent | None, Preset | None]:
    """Return `(agent, None)` or `(None, preset)`; 400 for both, an unknown preset; 404 for an unknown agent."""
    if preset_id is not None and agent_ref is not None:
        raise InvalidRequest("give agent or preset, not both")
    if agent_ref is not None:
        return agent_selectors.agent_get(ref=agent_ref), None
    preset = preset_get(preset_id if preset_id is not None else DEFAULT_PRESET)
    if preset is None:
        raise InvalidRequest(f"unknown preset: {preset_id}")
    return None, preset


def _strategy(value: str | None) -> str:
    if value is None:
        return MultitaskStrategy.REJECT
    if value not in MultitaskStrategy.values:
        raise InvalidRequest(f"multitaskStrategy must be one of {'|'.join(MultitaskStrategy.values)}")
    return value


def chat_round_start(
    *,
    actor: str,
    messages,
    preset: str | None = None,
    agent: str | None = None,
    tools: list[dict] | None = None,
    system: str | None = None,
    conversation_id: str | None = None,
    multitask_strategy: str | None = None,
    request_id: str = "",
    subject: str = "",
    kind: str = RunKind.CHAT,
) -> RoundStart:
    """Check one round and start its `chat` run; return the `RoundStart` (the run is `running`).

    In: the billing actor `"<org>/<subject>"`; the caller's messages (`[{role, content}]`);
    `preset` or `agent` (a name or id of the org's agents); `tools` (OpenAI function
    definitions, already shape-checked); `system`; `conversation_id`; `multitask_strategy`
    (`reject` default, `enqueue`); `subject`, the calling user (a preset handler acts for them);
    `kind`, the run's kind (`chat`; the A2A face starts its tasks as rounds of kind `a2a`, whose
    policy resumes them as chat's).
    Raises, with nothing stored or billed: `InvalidRequest`
    (400), `SecretInTranscript` (422), `NotFound` (404 agent), `AgentExternal` (409),
    `ConversationBusy` (409), `InferenceUnavailable` (503), `InsufficientBalance` (402),
    `BalanceUnavailable` (503). Org context required.
    """
    cleaned = clean_messages(messages, required=True)
    system_text = check_system(system)
    check_tools(tools)
    strategy = _strategy(multitask_strategy)
    driver_agent, driver_preset = _driver(preset_id=preset, agent_ref=agent)
    refuse_credentials(cleaned, system_text, tools=tools)
    caller_tools = list(tools or [])
    if driver_agent is not None:
        agent_row, run_agent, base = driver_agent, driver_agent, driver_agent.instructions or ""
        client_tools = caller_tools
        name = driver_agent.name
    else:
        server = list(driver_preset.server_tools) if driver_preset.server_executed else []
        run_agent = Agent(name=driver_preset.id, model="", instructions=driver_preset.system_prompt, tools=server)
        agent_row, base, name = None, driver_preset.system_prompt, driver_preset.id
        client_tools = ([] if driver_preset.server_executed else [dict(f) for f in driver_preset.functions]) + caller_tools
    handler = preset_handler(driver_preset.id) if driver_preset is not None else None
    fixed = handler.answer(messages=cleaned, subject=subject) if handler is not None else None
    user_text = last_user_message(cleaned)
    title = title_from(cleaned)
    # A round its preset's handler answers calls no model: no inference needed, and billing's fee is 0.
    request = RunRequest(kind=kind, agent=agent_row if fixed is None else None, agent_name=name,
                         model=FIXED_MODEL if fixed is not None else "", input=user_text or "", actor=actor,
                         request_id=request_id, calls_model=fixed is None, executor_here=fixed is None)
    deadline = time.monotonic() + max(settings.AGENTS_CHAT_ENQUEUE_WAIT_SECONDS, 0.0)
    while True:
        try:
            # The conversation's lock (409 `conversation_busy`) and the user's turn commit with the
            # run, or nothing does.
            with run_starting(request) as run:
                conversation, created = services.conversation_open_for_round(
                    conversation_id=conversation_id, title=title, actor=actor, run_id=run.id)
                history = [] if created else selectors.thread_tail(conversation=conversation)
                prompt = compose_prompt(base=base, system=system_text, history=history, messages=cleaned)
                if user_text is not None:
                    turn = {"role": ChatRole.USER, "content": user_text}
                    if agent_row is not None and (agent_row.approval or {}).get("tools"):  # the round may wait: keep its prompt
                        turn["prompt"] = prompt
                    services.conversation_record_turns(conversation=conversation, turns=[turn], run_id=run.id)
            break
        except ConversationBusy:
            if strategy != MultitaskStrategy.ENQUEUE:
                raise
            if not services.conversation_wait_free(conversation_id=conversation_id, deadline=deadline):
                raise ConversationBusy(
                    f"a round of this conversation is still in flight after {settings.AGENTS_CHAT_ENQUEUE_WAIT_SECONDS:g} s",
                    conversationId=conversation_id) from None
    return RoundStart(run=run, conversation_id=conversation.id, agent=run_agent, prompt=prompt, client_tools=client_tools,
                      fixed=fixed, preset_id=driver_preset.id if driver_preset is not None else "", subject=subject)


def _reply(status: str, output: str, actions: list, ops: list, finish_reason: str = "") -> dict | None:
    """Return the assistant turn a round stores (`{role, content, tool_calls, finish_reason?}`), None for none.

    An `ok` round stores its reply; a round the user stopped stores what was written before the
    stop, marked `finish_reason: stopped` (a reload shows the words the user saw, never as a
    whole reply); any other failed round stores nothing.
    """
    calls = {"actions": list(actions), "ops": list(ops)} if actions or ops else None
    if status == RunStatus.OK:
        return {"role": ChatRole.ASSISTANT, "content": output, "tool_calls": calls}
    if finish_reason == FinishReason.STOPPED and (output or calls):
        return {"role": ChatRole.ASSISTANT, "content": output or "", "tool_calls": calls, "finish_reason": str(FinishReason.STOPPED)}
    return None


def _release(start: RoundStart, row: Run, actions: list, ops: list) -> None:
    """Store the round's reply (an `ok` run's) and free its conversation."""
    services.conversation_release(conversation_id=start.conversation_id, run_id=start.run.id,
                                  reply=_reply(row.status, row.output, actions, ops, row.finish_reason))


def _execute_fixed(start: RoundStart, listener: RunListener | None) -> tuple[Run, bool]:
    """Finish a round its preset handler answered: the reply and ops told to the listener, then the run
    finished with its reply stored and its conversation released in the same transaction.

    Returns `(run, released)`: `released` False when the run was finished elsewhere (or the
    release failed; it was logged): the caller frees the conversation then.
    """
    fixed = start.fixed
    ops = [dict(op) for op in fixed.ops]
    if listener is not None:
        try:
            if fixed.reply:
                listener.delta(fixed.reply)
            if ops:
                listener.ops(ops)
        except Exception:  # a listener must not raise (RunListener)
            logger.exception("a chat listener failed")
    outcome = Outcome(status=RunStatus.OK, output=fixed.reply, model=FIXED_MODEL, ops=ops, duration_ms=None)
    released = False
    with run_finishing(run_id=start.run.id, outcome=outcome) as row:
        if row is not None:
            _release(start, row, [], list(fixed.ops))
            released = True
    finished = row or Run.objects.get(pk=start.run.id)
    finished.actions, finished.ops = [], ops
    return finished, released


def chat_round_execute(start: RoundStart, *, listener: RunListener | None = None) -> Run:
    """Execute a started round, store the reply (only for an `ok` run) and release its conversation; return the run.

    The reply is stored and the conversation released in the transaction that finishes the run
    (the body of `run_finishing`): a round that finds the run finished finds its reply stored
    too, never a window where its own turn would land between the user's turn and the reply.
    If the run was finished elsewhere, or the round failed before finishing it, the
    conversation is released afterwards all the same. The returned run carries `.actions`
    (`[{name, args, result|error}]`) and `.ops` (`[{name, args}]`). Org context required.
    Blocks while the model writes (`chat_round_steps` is the same as run steps).
    """
    return drive(chat_round_steps(start, listener=listener))


def chat_round_steps(start: RoundStart, *, listener: RunListener | None = None) -> Steps[Run]:
    """`chat_round_execute` as run steps (`runs.drive`): what a request's event loop awaits.

    The loop runs through `run_conclude_steps`; this round then finishes the run itself
    (`run_finishing`) with its reply and release in the finish's transaction — the lifecycle
    never calls back into chat.
    """
    run = None
    released = False
    handler = preset_handler(start.preset_id) if start.preset_id and start.fixed is None else None
    hearing = listener
    if handler is not None:
        hearing = _ExpandingListener(listener, lambda ops: handler.expand_ops(ops, subject=start.subject))
    try:
        if start.fixed is not None:
            run, released = _execute_fixed(start, listener)
        else:
            concluded = yield from run_conclude_steps(run=start.run, agent=start.agent, prompt=start.prompt,
                                                      client_tools=start.client_tools, listener=hearing)
            if concluded.waiting is not None:  # waiting for approval: the conversation is freed below
                run = concluded.waiting
            else:
                outcome = concluded.outcome
                with run_finishing(**concluded.finish_arguments()) as row:
                    if row is not None:
                        ops = list(outcome.ops or [])
                        if handler is not None and ops:
                            ops = hearing.rewrite(ops)
                        _release(start, row, list(outcome.actions or []), ops)
                        released = True
                run = concluded.finished(row)
            if handler is not None and getattr(run, "ops", None):
                run.ops = hearing.rewrite(list(run.ops))
    finally:
        if not released:  # finished elsewhere, or failed before finishing: free the conversation anyway
            reply = None
            if run is not None:
                reply = _reply(run.status, run.output, getattr(run, "actions", []) or [], getattr(run, "ops", []) or [],
                               getattr(run, "finish_reason", "") or "")
            services.conversation_release(conversation_id=start.conversation_id, run_id=start.run.id, reply=reply)
    return run


def chat_round_body(start: RoundStart, run: Run) -> dict:
    """Return the 200 body `{reply, actions, ops, conversationId, runId}` (arrays never null)."""
    return {
        "reply": run.output or "",
        "actions": list(getattr(run, "actions", []) or []),
        "ops": list(getattr(run, "ops", []) or []),
        "conversationId": start.conversation_id,
        "runId": run.id,
    }


def round_resume_prompt(run: Run, agent) -> list[dict] | None:
    """Return the opening messages of a chat round resumed after its approvals (issue 28).

    The prompt the round opened with, kept on its user turn (`Message.prompt`: the agent's
    instructions, the request's `system` text, the thread and the request's messages, exactly as
    the model got them). A turn stored without one (before it was kept) gets the agent's
    instructions and the conversation's stored thread up to and including that turn. None when
    the round's conversation is gone (the agent's own prompt is used). Registered with
    the `chat` kind's `RunPolicy.resume_prompt` (`chat.apps`). Org context required.
    """
    turn = Message.objects.filter(run_id=run.id, role=ChatRole.USER).select_related("conversation").order_by("position").first()
    if turn is None:
        return None
    if turn.prompt:
        return [dict(message) for message in turn.prompt]
    history = [m for m in selectors.thread_tail(conversation=turn.conversation) if m.position <= turn.position]
    base = (getattr(agent, "instructions", "") or "") if agent is not None else ""
    return compose_prompt(base=base, system="", history=history, messages=[])


def round_resumed(run: Run) -> None:
    """Post a resumed chat round's reply to its conversation once it finished `ok` (issue 28)."""
    if run.status != RunStatus.OK:
        return
    turn = Message.objects.filter(run_id=run.id, role=ChatRole.USER).order_by("position").first()
    if turn is not None:
        services.conversation_post_assistant(conversation_id=turn.conversation_id, text=run.output, run_id=run.id)
