"""The A2A request handler: A2A v1.0 methods mapped onto runs, sessions and conversations.

`a2a-sdk`'s JSON-RPC dispatcher (`a2a.server.routes.jsonrpc_dispatcher`) parses and checks each
call and answers its errors; this handler — one per request, for the caller and the agent the
URL names — does what each method means here:

| method | here |
|---|---|
| `SendMessage` | start a task (a run of kind `a2a`, `services.task_start`) and, unless `configuration.returnImmediately`, await its end (or its wait for an approval); answer the `Task` |
| `SendStreamingMessage` | start it and stream: the `Task` (WORKING), the reply as `artifactUpdate`s (`append`), then a `statusUpdate` with the final state |
| `GetTask` | the run as a `Task` (`historyLength` honoured) |
| `CancelTask` | the session's `stop`; answers the task once it ended (at most `AGENTS_A2A_CANCEL_WAIT_SECONDS`, 10) |
| `ListTasks`, `SubscribeToTask`, push notification configs, `GetExtendedAgentCard` | not offered (`-32004`, `-32003`, `-32007`) |

The v0.3 names (`message/send`, `message/stream`, `tasks/get`, `tasks/cancel`) reach the same
methods through the SDK's v0.3 adapter. A started run always goes on to its end and is recorded,
whether or not the caller stays (it runs on the server's loop, not in the request).

Errors (A2A's JSON-RPC codes): the platform's refusals become `A2AError`s in `a2a_error`, whose
`data` carries the platform's `status` and `code`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncGenerator

from django.conf import settings

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from agents.execution import RunListener
from agents.models import Agent
from agents_site.deferred import serving_loop
from agents_site.errors import ApiError
from agents_site.vocabulary import ErrorCode
from a2a_server import selectors, services, wire
from chat.rounds import RoundStart, chat_round_steps
from runs.drive import drive_async, start_on_loop
from runs.streaming import in_org
from sessions.errors import SessionFinished
from sessions.stream import read_store
from tenancy.principal import Principal

logger = logging.getLogger(__name__)

_DONE = object()


def a2a_error(error: ApiError) -> A2AError:
    """Return the A2A error a platform refusal answers as.

    400/413/422 (the request's content: a bad `contextId`, a credential in the text, too long) →
    `InvalidParamsError` (-32602); 404 → `TaskNotFoundError` (-32001); 409 `agent_external` (the
    agent runs elsewhere) → `UnsupportedOperationError` (-32004); anything else — 402 balance,
    409 `conversation_busy`, 429, 503 — → `InternalError` (-32603). The message is the platform's
    sentence; `data` (the `ErrorInfo` metadata on the wire) is `{"status", "code"}` as strings.
    """
    data = {"status": str(error.status), "code": str(error.code)}
    if error.status in (400, 413, 422):
        return InvalidParamsError(error.message, data=data)
    if error.status == 404:
        return TaskNotFoundError(error.message, data=data)
    if error.code == ErrorCode.AGENT_EXTERNAL:
        return UnsupportedOperationError(error.message, data=data)
    return InternalError(error.message, data=data)


class _Frames(RunListener):
    """Hear a running task's reply on the step threads; hand each piece to the stream's queue on its loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
        self.loop, self.queue = loop, queue

    def delta(self, text: str) -> None:
        if text:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, text)


def cancel_wait_seconds() -> float:
    """Return `AGENTS_A2A_CANCEL_WAIT_SECONDS` (default 10): how long `CancelTask` waits for the stopped run to end."""
    return max(0.0, float(getattr(settings, "AGENTS_A2A_CANCEL_WAIT_SECONDS", 10)))


class RunTaskHandler(RequestHandler):
    """Serve the A2A methods for `principal` on `agent` of org `org` (see the module text)."""

    def __init__(self, *, principal: Principal, agent: Agent, org: str, request_id: str = "") -> None:
        self.principal, self.agent, self.org, self.request_id = principal, agent, org, request_id

    async def _store(self, fn, **kwargs):
        """Run store work `fn(**kwargs)` in a thread for the org; a platform refusal becomes its A2A error."""
        try:
            return await read_store(self.org, fn, **kwargs)
        except ApiError as exc:
            raise a2a_error(exc) from exc

    async def _record(self, task_id: str) -> selectors.TaskRecord:
        return await self._store(selectors.task_get, agent=self.agent, task_id=task_id)

    async def _task(self, task_id: str, history_length: int | None = None) -> a2a.Task:
        record = await self._record(task_id)
        return wire.task_of(record.run, context_id=record.context_id, turns=record.turns, history_length=history_length)

    async def _start(self, params: a2a.SendMessageRequest) -> RoundStart:
        message = params.message
        text = wire.message_text(message)
        if message.task_id:
            record = await self._record(message.task_id)  # unknown: -32001
            raise InvalidParamsError(
                f"task {record.run.id} takes no further message (a task is one message and its reply); send the next "
                f"message with contextId {record.context_id!r} to continue the conversation")
        return await self._store(services.task_start, principal=self.principal, agent=self.agent, text=text,
                                 context_id=message.context_id, request_id=self.request_id)

    def _launch(self, start: RoundStart, listener: RunListener | None = None) -> asyncio.Future:
        """Execute a started task on the server's loop, to its end whatever becomes of this request;
        return a future of its run."""
        context = contextvars.copy_context()
        steps = in_org(self.org, chat_round_steps(start, listener=listener))
        loop = serving_loop() or asyncio.get_running_loop()
        return asyncio.wrap_future(start_on_loop(loop, lambda: drive_async(steps, context=context)))

    async def on_message_send(self, params: a2a.SendMessageRequest, context: ServerCallContext) -> a2a.Task:
        """`SendMessage`: start a task; return it when it ended or waits (or at once with `returnImmediately`)."""
        history = _history_length(params.configuration)
        start = await self._start(params)
        done = self._launch(start)
        if not params.configuration.return_immediately:
            try:
                await asyncio.shield(done)
            except Exception:
                logger.exception("an A2A task failed outside its run's record")
        return await self._task(start.run.id, history)

    async def on_message_send_stream(self, params: a2a.SendMessageRequest, context: ServerCallContext) -> AsyncGenerator:
        """`SendStreamingMessage`: the task, its reply in pieces, then its final status."""
        start = await self._start(params)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        done = self._launch(start, _Frames(loop, queue))
        done.add_done_callback(lambda _f: queue.put_nowait(_DONE))
        yield await self._task(start.run.id)
        run_id, context_id = start.run.id, start.conversation_id
        first = True
        while (item := await queue.get()) is not _DONE:
            yield a2a.TaskArtifactUpdateEvent(task_id=run_id, context_id=context_id, append=not first, last_chunk=False,
                                              artifact=wire.reply_artifact(item, run_id=run_id))
            first = False
        if done.exception() is not None:
            logger.error("an A2A task failed outside its run's record", exc_info=done.exception())
        record = await self._record(run_id)
        if not first:
            yield a2a.TaskArtifactUpdateEvent(task_id=run_id, context_id=context_id, append=True, last_chunk=True,
                                              artifact=a2a.Artifact(artifact_id=f"{run_id}-{wire.REPLY_ARTIFACT}",
                                                                    name=wire.REPLY_ARTIFACT))
        yield a2a.TaskStatusUpdateEvent(task_id=run_id, context_id=record.context_id or context_id,
                                        status=wire.status_of(record.run, context_id=record.context_id or context_id))

    async def on_get_task(self, params: a2a.GetTaskRequest, context: ServerCallContext) -> a2a.Task:
        """`GetTask`: the run named `id` as a `Task` (-32001 when it is not this agent's A2A task in this org)."""
        history = params.history_length if params.HasField("history_length") else None
        if history is not None and history < 0:
            raise InvalidParamsError("historyLength must be 0 or more")
        return await self._task(params.id, history)

    async def on_cancel_task(self, params: a2a.CancelTaskRequest, context: ServerCallContext) -> a2a.Task:
        """`CancelTask`: stop the run (its session's `stop`); -32002 once it has ended."""
        record = await self._record(params.id)
        if wire.task_state(record.run) in wire.TERMINAL:
            raise TaskNotCancelableError(f"task {record.run.id} has ended ({a2a.TaskState.Name(wire.task_state(record.run))})")
        try:
            await self._store(services.task_cancel, run=record.run, actor=self.principal.actor)
        except A2AError as exc:
            if isinstance(exc.__cause__, SessionFinished):
                raise TaskNotCancelableError(f"task {record.run.id} has ended") from exc
            raise
        deadline = asyncio.get_running_loop().time() + cancel_wait_seconds()
        pause = 0.02
        while True:
            task = await self._task(params.id)
            if task.status.state in wire.TERMINAL or asyncio.get_running_loop().time() >= deadline:
                return task
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)

    async def on_list_tasks(self, params, context):
        raise UnsupportedOperationError("ListTasks is not offered: keep the task ids SendMessage answers")

    async def on_subscribe_to_task(self, params, context):
        raise UnsupportedOperationError("SubscribeToTask is not offered: poll GetTask, or watch the run's session stream")
        yield  # an async generator, as the interface declares

    async def on_create_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(self, params, context):
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(self, params, context):
        raise ExtendedAgentCardNotConfiguredError()


def _history_length(configuration: a2a.SendMessageConfiguration) -> int | None:
    if configuration.HasField("history_length"):
        if configuration.history_length < 0:
            raise InvalidParamsError("configuration.historyLength must be 0 or more")
        return configuration.history_length
    return None
