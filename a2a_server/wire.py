"""A2A v1.0 wire shapes of runs: a task is a run, its context the run's conversation.

`message_text` reads what a caller's `Message` says (text parts; data parts as JSON text; a
file part is refused with A2A's `ContentTypeNotSupportedError`); `task_of` writes a run as a
`Task`: `id` = the run id, `contextId` = its conversation, `status` from the run's status,
`history` the conversation turns of this run (the caller's message, the agent's reply) and, once
the run is `ok`, one artifact `reply` holding the reply's text. No I/O here.

State map (run → `TaskState`): `queued` → SUBMITTED, `running` → WORKING, `waiting` (a tool
call waits for a person's approval) → INPUT_REQUIRED with a status message saying so, `ok` →
COMPLETED, `error` → FAILED (status message: the run's error), an `error` run a stop ended
(`finishReason: stopped`) → CANCELED.
"""

from __future__ import annotations

import json

from google.protobuf.json_format import MessageToDict
from google.protobuf.timestamp_pb2 import Timestamp

from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError

from agents_site.vocabulary import ChatRole, FinishReason, RunStatus
from runs.models import Run

MAX_TEXT_BYTES = 128 * 1024
REPLY_ARTIFACT = "reply"

_STATES = {
    RunStatus.QUEUED: a2a.TaskState.TASK_STATE_SUBMITTED,
    RunStatus.RUNNING: a2a.TaskState.TASK_STATE_WORKING,
    RunStatus.WAITING: a2a.TaskState.TASK_STATE_INPUT_REQUIRED,
    RunStatus.OK: a2a.TaskState.TASK_STATE_COMPLETED,
    RunStatus.ERROR: a2a.TaskState.TASK_STATE_FAILED,
}
TERMINAL = frozenset({a2a.TaskState.TASK_STATE_COMPLETED, a2a.TaskState.TASK_STATE_FAILED, a2a.TaskState.TASK_STATE_CANCELED,
                      a2a.TaskState.TASK_STATE_REJECTED})
WAITING_NOTE = "A tool call of this task waits for a person of the agent's org to approve it (console or API); the task goes on once they answer."


def message_text(message: a2a.Message) -> str:
    """Return the text a caller's message says: its text parts, and its data parts as compact JSON,
    joined by newlines.

    Raises `InvalidParamsError` (-32602) for a message that is not the user's, has no part, or
    says nothing or more than 128 KiB; `ContentTypeNotSupportedError` (-32005) for a file part
    (`raw` or `url`): agents here read text.
    Example: parts `[{"text": "hi"}, {"data": {"n": 1}}]` → `'hi\\n{"n":1}'`.
    """
    if message.role != a2a.Role.ROLE_USER:
        raise InvalidParamsError("message.role must be ROLE_USER")
    if not message.parts:
        raise InvalidParamsError("message.parts must hold at least one part")
    texts = []
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            texts.append(json.dumps(MessageToDict(part.data), ensure_ascii=False, separators=(",", ":")))
        elif kind in ("raw", "url"):
            raise ContentTypeNotSupportedError(f"message.parts[{index}] is a file part; this agent reads text and JSON data parts only")
        else:
            raise InvalidParamsError(f"message.parts[{index}] has no content (text, data, raw or url)")
    text = "\n".join(texts)
    if not text.strip():
        raise InvalidParamsError("message.parts say nothing: the text is empty")
    if len(text.encode()) > MAX_TEXT_BYTES:
        raise InvalidParamsError(f"the message is over {MAX_TEXT_BYTES // 1024} KiB")
    return text


def task_state(run: Run) -> int:
    """Return the `TaskState` of `run` (see the module text)."""
    if run.status == RunStatus.ERROR and run.finish_reason == FinishReason.STOPPED:
        return a2a.TaskState.TASK_STATE_CANCELED
    return _STATES.get(run.status, a2a.TaskState.TASK_STATE_WORKING)


def _timestamp(value) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value)
    return stamp


def text_message(text: str, *, role: int, message_id: str, task_id: str, context_id: str) -> a2a.Message:
    """Return a one-text-part `Message`."""
    return a2a.Message(message_id=message_id, task_id=task_id, context_id=context_id, role=role, parts=[a2a.Part(text=text)])


def status_of(run: Run, *, context_id: str) -> a2a.TaskStatus:
    """Return `run`'s `TaskStatus`: its state, when it last changed, and a message for a failed,
    stopped or waiting run (its error, or what it waits for)."""
    state = task_state(run)
    status = a2a.TaskStatus(state=state)
    stamp = _timestamp(run.finished_at or run.started_at or run.created_at)
    if stamp is not None:
        status.timestamp.CopyFrom(stamp)
    note = ""
    if state == a2a.TaskState.TASK_STATE_INPUT_REQUIRED:
        note = WAITING_NOTE
    elif state in (a2a.TaskState.TASK_STATE_FAILED, a2a.TaskState.TASK_STATE_CANCELED):
        note = run.error or ("stopped" if state == a2a.TaskState.TASK_STATE_CANCELED else "the run failed")
    if note:
        status.message.CopyFrom(text_message(note, role=a2a.Role.ROLE_AGENT, message_id=f"{run.id}-status", task_id=run.id,
                                             context_id=context_id))
    return status


def reply_artifact(text: str, *, run_id: str) -> a2a.Artifact:
    """Return the task's one artifact: the agent's reply as a text part."""
    return a2a.Artifact(artifact_id=f"{run_id}-{REPLY_ARTIFACT}", name=REPLY_ARTIFACT, parts=[a2a.Part(text=text)])


def task_of(run: Run, *, context_id: str, turns: list, history_length: int | None = None) -> a2a.Task:
    """Return `run` as an A2A `Task`.

    In: the run; `context_id`, its conversation's id; `turns`, the conversation's messages of
    this run in order (`chat.models.Message`: the caller's turn, then the reply once stored);
    `history_length` (the caller's `historyLength`: at most that many of the newest turns; 0 none).
    """
    role_of = {ChatRole.USER: a2a.Role.ROLE_USER, ChatRole.ASSISTANT: a2a.Role.ROLE_AGENT}
    history = [text_message(t.content, role=role_of[t.role], message_id=t.id, task_id=run.id, context_id=context_id)
               for t in turns if t.role in role_of]
    if history_length is not None:
        history = history[len(history) - history_length:] if history_length > 0 else []
    task = a2a.Task(id=run.id, context_id=context_id, status=status_of(run, context_id=context_id), history=history)
    if run.status == RunStatus.OK:
        task.artifacts.append(reply_artifact(run.output or "", run_id=run.id))
    task.metadata.update({"runId": run.id, "sessionId": run.session_id or ""})
    return task
