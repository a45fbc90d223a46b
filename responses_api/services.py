"""Writes of the Responses API: one response is one run of kind `responses` (issue 56).

`response_start` resolves the agent named as `model`, refuses a credential in anything the caller
wrote, works out the thread the response continues (`previous_response_id`: the chain of stored
responses; `conversation`: a chat conversation's turns) and starts the run through the one
lifecycle (`run_starting`: recorded, gated, billed on success, with a live session) — in the same
transaction it takes the conversation's lock, posts the caller's turns to it and stores the
response's row (`store: true`); a background response is accepted `queued` for a worker.
`response_steps` runs the agent loop on the composed prompt (the agent's instructions and the
request's `instructions`, the thread's items, the input items; the caller's function tools come
back as `function_call` items) and finishes the run, writing the output items, the reply to the
conversation and — for a background response — the closing stream event in the finish's
transaction. `response_cancel` is the run session's `stop`. Org context required.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from agents.approval_rules import has_rules
from agents.execution import RunListener, run_span
from agents.execution.service import run_conclude_steps
from agents.inference import inference_configured
from agents.models import Agent
from agents_site.errors import ApiError
from agents_site.schemas import scan_caller_text
from agents_site.vocabulary import AgentHosting, ChatRole, ControlCommand, ResponseStatus, RunKind, RunStatus, WebhookEventType
from chat.services import conversation_exists, conversation_open_for_round, conversation_record_turns, conversation_release
from openai_api.errors import ApprovalUnsupported
from openai_api.selectors import model_get
from responses_api import selectors
from responses_api.errors import ConversationNotFound
from responses_api.models import ResponseEvent, StoredResponse
from responses_api.wire import EventWriter, ResponseRequest, item_text, prompt_messages, response_body, terminal_event
from runs.dispatch import run_dispatch
from runs.drive import Steps, drive
from runs.lifecycle import InferenceUnavailable, Outcome, RunNotQueued, run_finish, run_finishing, run_mark_running, run_starting
from runs.models import Run, RunTask
from runs.request import RunRequest
from sessions.control import control_send
from tenancy import stores
from tenancy.principal import Principal
from webhooks.events import emit as webhook_emit

logger = logging.getLogger(__name__)

_QUEUED = frozenset({RunStatus.QUEUED})


@dataclass
class StartedResponse:
    """A response whose run has started (`running`, or `queued` for a worker): the run, its row
    (unsaved for `store: false`), the agent as the loop runs it, and its prompt."""

    run: Run
    record: StoredResponse
    agent: Agent
    prompt: list[dict]
    chat_tools: list[dict]

    def body(self, run: Run | None = None, *, status: str | None = None, output: list[dict] | None = None) -> dict:
        """Return the `response` object of this response as `run` (default: as started) stands."""
        run = run or self.run
        return record_body(self.record, run, status=status, output=output)


def record_body(record: StoredResponse, run: Run, *, status: str | None = None, output: list[dict] | None = None) -> dict:
    """Return the `response` object of `record` whose run is `run` (status derived from the run unless given)."""
    return response_body(run=run, status=status or selectors.response_status(run), model=record.model,
                         settings=record.request, output=record.output_items if output is None else output,
                         conversation_id=record.conversation_id, previous_response_id=record.previous_response_id)


def response_agent(agent: Agent, request_settings: dict, gateway_options: dict) -> Agent:
    """Return `agent` as the response runs it: an unsaved copy with the caller's `max_output_tokens`,
    `temperature` and `top_p` where given, and the chat-completions fields for the gateway
    (`tool_choice`, `response_format`, `parallel_tool_calls`)."""
    effective = copy.copy(agent)
    if request_settings.get("max_output_tokens") is not None:
        effective.max_tokens = request_settings["max_output_tokens"]
    if request_settings.get("temperature") is not None:
        effective.temperature = request_settings["temperature"]
    if request_settings.get("top_p") is not None:
        effective.top_p = request_settings["top_p"]
    effective.gateway_options = dict(gateway_options)
    return effective


def response_prompt(agent: Agent, instructions: str | None, history: list[dict], items: list[dict]) -> list[dict]:
    """Return the prompt: the agent's instructions and the request's `instructions` as one system
    turn (role `AGENTS_INSTRUCTIONS_ROLE`; left out when both are empty), then the thread's items
    and the input items as chat messages (`wire.prompt_messages`).

    Example: instructions "Be brief." and "Answer in French.", no history, input "hi" →
    `[system "Be brief.\\n\\nAnswer in French.", user "hi"]`.
    """
    text = "\n\n".join(part for part in ((agent.instructions or "").strip(), (instructions or "").strip()) if part)
    prompt: list[dict] = []
    if text:
        role = ChatRole.USER if settings.AGENTS_INSTRUCTIONS_ROLE == ChatRole.USER else ChatRole.SYSTEM
        prompt.append({"role": str(role), "content": text})
    prompt.extend(prompt_messages([*history, *items]))
    return prompt


def _scan(request: ResponseRequest) -> None:
    """Refuse (422 `secret_in_transcript`, findings naming the field) a credential in anything the caller wrote."""
    texts = []
    for item in request.input_items:
        if item["type"] == "message":
            texts.append(item_text(item))
        elif item["type"] == "function_call":
            texts.append(f"{item['name']} {item['arguments']}")
        else:
            texts.append(item["output"])
    scan_caller_text({"input": texts, "instructions": request.instructions or "", "tools": request.tools,
                      "metadata": request.metadata, "text": request.text, **request.echoed})


def _turns(items: list[dict]) -> list[dict]:
    """Return the conversation turns a response's input items post: user and system messages, and
    function outputs as `tool` turns (the console's chat shows them)."""
    turns = []
    for item in items:
        if item["type"] == "message" and item["role"] != "assistant":
            role = ChatRole.SYSTEM if item["role"] in ("system", "developer") else ChatRole.USER
            turns.append({"role": str(role), "content": item_text(item)})
        elif item["type"] == "function_call_output":
            turns.append({"role": str(ChatRole.TOOL), "content": item["output"]})
    return turns


def response_start(*, principal: Principal, request: ResponseRequest, request_id: str = "") -> StartedResponse:
    """Start the run of one response; return it with what `response_steps` needs.

    In order: the agent named by `model` the key may use (404 `model_not_found`) → an agent with
    approval rules is refused (400 `approval_unsupported`, param `model`) → no credential in the
    input, instructions, tools, metadata or text format (422 `secret_in_transcript`) →
    `previous_response_id` names a stored response of the org (404, param
    `previous_response_id`) / `conversation` a chat conversation of the org (404, param
    `conversation`) → `run_starting` (kind `responses`): external agent 409, inference 503, the
    balance gate 402/503 with `AGENTS_OPENAI_FEE_CENTS`; in its transaction the conversation's
    lock (409 `conversation_busy`), the caller's turns and the response's row; a background
    response is `queued` with its task and its first two stream events (`response.created`,
    `response.queued`). Nothing is stored or billed when any step refuses.
    """
    agent = model_get(principal=principal, ref=request.model, listed_only=False)
    if has_rules(agent):
        raise ApprovalUnsupported(agent.name)
    _scan(request)
    conversation_id = ""
    history: list[dict] = []
    if request.previous_response_id:
        previous = selectors.response_get(response_id=request.previous_response_id, principal=principal,
                                          param="previous_response_id")
        conversation_id = previous.conversation_id
        history = selectors.chain_items(record=previous)
    elif request.conversation:
        if not conversation_exists(request.conversation):
            raise ConversationNotFound(request.conversation)
        conversation_id = request.conversation
        history = selectors.conversation_items(conversation_id=conversation_id)
    prompt = response_prompt(agent, request.instructions, history, request.input_items)
    run_request = RunRequest(kind=RunKind.RESPONSES, agent=agent, input=request.input_text(), actor=principal.actor,
                             request_id=request_id, executor_here=not request.background, queued=request.background)
    org = stores.current_org()
    with run_starting(run_request) as run:
        record = StoredResponse(id=run.id, model=agent.name, previous_response_id=request.previous_response_id or "",
                                request=request.settings(), input_items=request.input_items, background=request.background,
                                created_at=run.created_at)
        if request.store:
            title = next((item_text(item) for item in request.input_items if item["type"] == "message"), "") or "Response"
            conversation, _ = conversation_open_for_round(conversation_id=conversation_id or None, title=title[:80],
                                                          actor=principal.actor, run_id=run.id)
            turns = _turns(request.input_items)
            if turns:
                conversation_record_turns(conversation=conversation, turns=turns, run_id=run.id)
            record.conversation_id = conversation.id
            record.save(force_insert=True)
        if request.background and run.started_here:
            RunTask.objects.create(run=run, created_at=run.created_at)
            writer = EventWriter(emit=_keep(run.id))
            body = record_body(record, run)
            writer.lifecycle("response.created", body)
            writer.lifecycle("response.queued", body)
            run_id = run.id
            transaction.on_commit(lambda: run_dispatch(org=org, run_id=run_id), using=stores.current_alias())
    return StartedResponse(run=run, record=record, agent=response_agent(agent, record.request, request.gateway_options),
                           prompt=prompt, chat_tools=request.chat_tools)


def _keep(response_id: str):
    """Return an `emit` that keeps each event of a background response in the store (for resuming)."""

    def emit(event: dict) -> None:
        with stores.org_atomic():
            ResponseEvent.objects.create(response_id=response_id, sequence_number=event["sequence_number"],
                                         type=event["type"], body=event)

    return emit


class _WriterListener(RunListener):
    """Turn what the agent loop hears into stream events (`EventWriter`): deltas and the caller's calls."""

    def __init__(self, writer: EventWriter, *, streamed: bool = True) -> None:
        self.writer = writer
        self.streamed = streamed  # False: a response answered whole, asked of the gateway not streamed (decision 1534)

    def delta(self, text: str) -> None:
        self.writer.delta(text)

    def tool(self, action: dict) -> None:  # a tool of the agent's own, executed here: in the run's session, not the stream
        return None

    def ops(self, ops: list[dict]) -> None:
        self.writer.calls(ops)


def response_steps(started: StartedResponse, *, writer: EventWriter | None = None, durable: bool = False) -> Steps[Run]:
    """Execute a started (`running`) response's run and finish it; return the run (as run steps, `runs.drive`).

    In the finish's transaction: the output items (built by `writer`, or a silent one) on the
    response's row, the reply posted to its conversation and the conversation released; with
    `durable` (a background response, whose events are kept) the closing event too, so a reader
    that finds the run finished finds its last event. A live stream's closing event is emitted
    after the commit. The run ends `ok` or `error`; only `ok` is debited. Without `writer` (a
    response answered whole) the gateway is asked not streamed, its usage with it (decision 1534).
    """
    run = started.run
    record = started.record
    listener = _WriterListener(writer or EventWriter(emit=lambda event: None), streamed=writer is not None)
    writer = listener.writer
    released = False
    finished: Run | None = None
    try:
        with run_span(run_id=run.id, agent_name=started.agent.name, actor=run.actor, model=started.agent.model,
                      kind=RunKind.RESPONSES) as span:
            concluded = yield from run_conclude_steps(run=run, agent=started.agent, span=span, prompt=started.prompt,
                                                      client_tools=started.chat_tools, listener=listener)
            if concluded.waiting is not None:  # an agent with approval rules is refused at the start
                return concluded.waiting
            outcome = concluded.outcome
            with run_finishing(**concluded.finish_arguments()) as row:
                if row is not None:
                    _conclude(started, writer, row, outcome.output, list(outcome.ops or []), durable=durable)
                    released = True
            finished = concluded.finished(row)
    finally:
        if not released and record.conversation_id:
            conversation_release(conversation_id=record.conversation_id, run_id=run.id, reply=None)
    if not released:
        _conclude_elsewhere(started, writer, finished)
    elif not durable:  # a live stream: its closing event once the finish committed
        _close_stream(writer, record, finished, writer.items)
    return finished


def _conclude(started: StartedResponse, writer: EventWriter, row: Run, output: str, ops: list[dict], *, durable: bool) -> None:
    """Inside the finish's transaction: the output items, the reply, the release; the closing event when `durable`."""
    record = started.record
    status = selectors.response_status(row)
    items = writer.finish(text=row.output if row.output else output, ops=ops, status=status)
    record.output_items = items
    if not record._state.adding:  # stored (`store: true`)
        StoredResponse.objects.filter(pk=record.id).update(output_items=items)
    if record.conversation_id:
        reply = None
        if row.status == RunStatus.OK:
            reply = {"role": ChatRole.ASSISTANT, "content": row.output,
                     "tool_calls": {"actions": [], "ops": list(ops)} if ops else None}
        conversation_release(conversation_id=record.conversation_id, run_id=row.id, reply=reply)
    _announce(record, row, items)
    if durable:
        _close_stream(writer, record, row, items)


def _conclude_elsewhere(started: StartedResponse, writer: EventWriter, run: Run) -> None:
    """The run was finished by someone else (recovery, a stop before start): close the stream on what is recorded."""
    status = selectors.response_status(run)
    items = writer.finish(text=run.output, ops=[], status=status)
    started.record.output_items = items
    if not started.record._state.adding:
        StoredResponse.objects.filter(pk=run.id).update(output_items=items)
    _announce(started.record, run, items)
    _close_stream(writer, started.record, run, items)


#: The webhook event announcing a response that ended in each status (subscribable apart from `run.finished`).
WEBHOOK_EVENTS = {ResponseStatus.COMPLETED: WebhookEventType.RESPONSE_COMPLETED, ResponseStatus.FAILED: WebhookEventType.RESPONSE_FAILED,
                  ResponseStatus.CANCELLED: WebhookEventType.RESPONSE_CANCELLED,
                  ResponseStatus.INCOMPLETE: WebhookEventType.RESPONSE_INCOMPLETE}


def _announce(record: StoredResponse, run: Run, items: list[dict]) -> None:
    """Deliver `response.<status>` (data: the `response` object) to the org's endpoints subscribed to it.

    Called in the finish's transaction where there is one (the deliveries commit with the finish);
    `run.finished` goes out as for every run, from the lifecycle."""
    status = selectors.response_status(run)
    event = WEBHOOK_EVENTS.get(status)
    if event is not None:
        webhook_emit(event, record_body(record, run, status=status, output=items))


def _close_stream(writer: EventWriter, record: StoredResponse, run: Run, items: list[dict]) -> None:
    status = selectors.response_status(run)
    if status == ResponseStatus.CANCELLED:
        writer.emit("error", code="response_cancelled", message="the response was cancelled", param=None)
    else:
        writer.lifecycle(terminal_event(status), record_body(record, run, status=status, output=items))


# -- background -------------------------------------------------------------------------------------


def response_execute_queued(run: Run) -> None:
    """Execute a queued background response this worker took (its lease held), from `queued` to its end.

    The `RunPolicy.execute_queued` of the `responses` kind (`responses_api.apps`), called by
    `runs.background.run_execute_queued`. Its stream goes on from the events kept at acceptance
    (`response.in_progress`, the output, the closing event), each kept for resuming. A run that
    can no longer start (its agent gone or external, no inference, the balance) ends `error`
    "not started: …" (never billed), its stream closed `response.failed`. Org context required.
    """
    record = StoredResponse.objects.filter(pk=run.id).first()
    agent = run.agent
    refusal = ""
    if record is None:
        refusal = "the response was deleted"
    elif agent is None:
        refusal = "the agent no longer exists"
    elif agent.hosting == AgentHosting.EXTERNAL:
        refusal = "the agent runs elsewhere (hosting: external)"
    elif not inference_configured():
        refusal = InferenceUnavailable.default_message
    if not refusal:
        try:
            running = run_mark_running(run_id=run.id)
        except RunNotQueued:
            _close_unstarted(record, run.id)
            return
        except ApiError as exc:
            refusal = exc.message
    if refusal:
        run_finish(run_id=run.id, outcome=Outcome.failed(f"not started: {refusal}"), from_statuses=_QUEUED)
        _close_unstarted(record, run.id)
        return
    history = []
    if record.previous_response_id:
        previous = StoredResponse.objects.filter(pk=record.previous_response_id).first()
        history = selectors.chain_items(record=previous) if previous is not None else []
    elif record.conversation_id:
        history = [item for item in selectors.conversation_items(conversation_id=record.conversation_id)
                   if item["id"] not in {held["id"] for held in record.input_items}]
    gateway = _gateway_options(record.request)  # re-derived from the kept settings, as `wire.response_request` made them
    started = StartedResponse(run=running, record=record, agent=response_agent(agent, record.request, gateway),
                              prompt=response_prompt(agent, record.request.get("instructions"), history, record.input_items),
                              chat_tools=_chat_tools(record.request.get("tools") or []))
    writer = EventWriter(emit=_keep(run.id), start=selectors.events_head(response_id=run.id) + 1)
    writer.lifecycle("response.in_progress", started.body(running))
    drive(response_steps(started, writer=writer, durable=True))


def _gateway_options(request_settings: dict) -> dict:
    """Return the chat-completions fields a kept request passes to the gateway (as `wire.response_request` made them)."""
    options: dict = {}
    choice = request_settings.get("tool_choice", "auto")
    if choice in ("none", "required"):
        options["tool_choice"] = choice
    elif isinstance(choice, dict):
        options["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    fmt = (request_settings.get("text") or {}).get("format") or {"type": "text"}
    if fmt["type"] == "json_object":
        options["response_format"] = {"type": "json_object"}
    elif fmt["type"] == "json_schema":
        options["response_format"] = {"type": "json_schema",
                                      "json_schema": {key: value for key, value in fmt.items() if key != "type"}}
    return options


def _chat_tools(tools: list[dict]) -> list[dict]:
    """Return kept function tools as chat-completions definitions."""
    chat = []
    for tool in tools:
        function = {"name": tool["name"], **({"description": tool["description"]} if tool.get("description") else {}),
                    "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
        chat.append({"type": "function", "function": function})
    return chat


def _close_unstarted(record: StoredResponse | None, run_id: str) -> None:
    """Close the kept stream and free the conversation of a background response that never started."""
    run = Run.objects.filter(pk=run_id).first()
    if record is None or run is None:
        return
    if record.conversation_id:
        conversation_release(conversation_id=record.conversation_id, run_id=run_id, reply=None)
    head = selectors.events_head(response_id=run_id)
    last = ResponseEvent.objects.filter(response_id=run_id, sequence_number=head).values_list("type", flat=True).first()
    if last in CLOSING_EVENTS:
        return
    writer = EventWriter(emit=_keep(run_id), start=head + 1)
    _announce(record, run, [])
    try:
        _close_stream(writer, record, run, [])
    except IntegrityError:  # closed by a concurrent caller
        pass


#: The events that end a response's stream.
CLOSING_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def response_cancel(*, record: StoredResponse, actor: str) -> None:
    """Cancel background response `record`: its run session's `stop` (a queued run ends "cancelled
    before start", unbilled; a running one is stopped between steps, what it wrote before kept).
    A response already finished is left as it is. Org context required."""
    run = selectors.response_run(record=record)
    if run is None or run.status in RunStatus.FINISHED or not run.session_id:
        return
    from sessions.errors import SessionFinished  # only on a stop: keeps the sessions errors off the common path

    try:
        control_send(session_id=run.session_id, command=ControlCommand.STOP, actor=actor)
    except SessionFinished:
        return
    run = selectors.response_run(record=record)
    if run is not None and run.status in RunStatus.FINISHED:
        _close_unstarted(record, run.id)


def response_delete(*, record: StoredResponse) -> None:
    """Delete stored response `record` and its kept stream events (its run stays recorded, like every run;
    its turns stay in its conversation). A response deleted while it runs finishes unrecorded here."""
    with stores.org_atomic():
        ResponseEvent.objects.filter(response_id=record.id).delete()
        StoredResponse.objects.filter(pk=record.id).delete()
