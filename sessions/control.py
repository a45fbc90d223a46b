"""Steering: record a control command, forward it to a live executor (spec 003: POST …/{id}/{command}).

Two sides, one bus (`sessions.bus.get_bus()`: the Channels layer, or in-process):

* The dashboard side, `control_send`: appends the durable `control` event FIRST, then — if
  the session has a live executor (`Session.executor_channel` non-empty) — forwards
  `{"type": "control.command", "command", "message", "payload", "seq", "reply_to"}` to that
  channel and waits up to `AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS` (default 5) for
  `{"type": "control.ack", "seq"}` on `reply_to`. Acked → `forwarded` True; no ack or a
  failed send → 502 `forward_failed` "control recorded but forward failed: …" (the event
  stays recorded). A session with no executor yet is offered to the handlers higher layers
  register (`register_command_handler`): a task-backed session's queued run takes it (`stop`
  cancels a run not started, other commands are replayed when its executor attaches), a
  routed run no machine has claimed yet is withdrawn on `stop` — `forwarded` True. No
  executor and no handler → `forwarded` False: the running surface polls `GET …/{id}/control`.
* The executor side, `ExecutorInbox`: a run opens one for its session; a background receiver
  acks every command the moment it is queued, and the run drains them between steps with
  `pending()` or blocks on `wait(timeout)`.

A command is an intent, never a status change: nothing here writes the session's status.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socket
import threading
import time

from django.conf import settings
from django.db import connections

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ControlCommand, EventKind, SessionStatus
from sessions import fields, services
from sessions.backends.base import BusError
from sessions.bus import get_bus
from sessions.errors import ForwardFailed, SessionFinished, SessionNotFound
from sessions.models import Event, Session
from sessions.presenters import event_view
from sessions.selectors import control_events_after, executor_channel, session_get
from tenancy import stores

logger = logging.getLogger(__name__)

COMMAND_MESSAGE = "command must be " + "|".join(ControlCommand.values)


#: Handlers of commands for sessions with no live executor, registered by the apps that own
#: runs (`AppConfig.ready`): `handler(*, session, command, message) -> bool` (True = taken).
_command_handlers: list = []


def register_command_handler(handler) -> None:
    """Register `handler(*, session, command, message) -> bool` for commands no executor receives.

    A higher layer that owns the run behind a session (agents: a queued run's task; targets: a
    routed run's offer) registers here, so this lower layer reaches it without importing it.
    A handler returns True when it took the command (answered `forwarded: true`). Idempotent.
    """
    if handler not in _command_handlers:
        _command_handlers.append(handler)


def _forward_timeout() -> float:
    return float(getattr(settings, "AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS", 5))


def control_send(*, session_id: str, command: str, message: str | None = None, payload=None, actor: str) -> tuple[Event, bool]:
    """Record steering `command` on a session and forward it to its live executor, if any.

    Returns `(event, forwarded)`: the stored `control` event (payload
    `{"command", "message"?, "payload"?}`) and whether a live executor acknowledged it.
    Order (reference §2.3): 404 `SessionNotFound` (unknown or another org's) → 400 unknown
    command → 409 `SessionFinished` ("session is done; cannot pause a finished session") →
    400 "message too long" (16 KiB) → 400 "payload too large" (64 KiB) / invalid JSON →
    422 `SecretInTranscript` (the payload and the message are scanned)
    → 400 for `message` without a non-empty message or a payload → append → forward.
    Raises `ForwardFailed` (502, extras `command` and `event`) when an executor is registered
    but did not acknowledge; the event is recorded regardless. Org context required.
    """
    session = session_get(session_id=session_id)
    if command not in ControlCommand.values:
        raise InvalidRequest(COMMAND_MESSAGE)
    _refuse_finished(session.status, command)
    message = fields.clean_message(message)
    fields.dump_payload(payload)
    services.refuse_secrets(payload)
    services.refuse_secrets(message)  # stricter than spec 003: a credential is stored nowhere
    if command == ControlCommand.MESSAGE and not message and payload is None:
        raise InvalidRequest("message requires a 'message' or 'payload'")
    body: dict = {"command": command}
    if message is not None:
        body["message"] = message
    if payload is not None:
        body["payload"] = payload
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    actor = fields.bounded(actor, fields.MAX_ACTOR, "actor")
    with stores.org_atomic():  # the session cannot finish between this check and the append
        status = Session.objects.select_for_update().filter(pk=session.id).values_list("status", flat=True).first()
        if status is None:
            raise SessionNotFound()
        _refuse_finished(status, command)
        event = services.append_checked(session_id=session.id, kind=EventKind.CONTROL, payload_text=text, actor=actor)
    channel = executor_channel(session_id=session.id)
    if not channel:
        # No live executor: a higher layer may own the run behind this session (a queued
        # background run's task, a routed run's unclaimed offer) and take the command.
        for handler in list(_command_handlers):
            if handler(session=session, command=command, message=message):
                return event, True
        channel = executor_channel(session_id=session.id)  # its executor attached meanwhile
    if not channel:
        return event, False
    channel = _reachable(channel)
    if channel is None:
        # The executor lives in another process and the bus cannot leave this one (the
        # in-memory layer): it reads the command from the durable log between steps.
        return event, False
    try:
        _forward(channel, {"type": "control.command", "command": command, "message": message, "payload": payload, "seq": event.seq})
    except BusError as exc:
        raise ForwardFailed(f"control recorded but forward failed: {exc}", command=command, event=event_view(event)) from exc
    return event, True


#: Identifies this process in an executor channel recorded over a process-local bus.
PROCESS_TAG = f"{socket.gethostname()}:{os.getpid()}"
_LOCAL_MARK = "|"


def _reachable(recorded: str) -> str | None:
    """Return the bus channel of a recorded executor channel, or None if out of this process's reach.

    Over a process-local bus the executor records `"<host>:<pid>|<channel>"`; from any other
    process that name cannot be delivered to.
    """
    if _LOCAL_MARK not in recorded:
        return recorded
    tag, _, name = recorded.partition(_LOCAL_MARK)
    return name if tag == PROCESS_TAG else None


def _refuse_finished(status: str, command: str) -> None:
    """Raise 409 `SessionFinished` when `status` is terminal: a run that ended cannot be steered."""
    if status in SessionStatus.TERMINAL:
        raise SessionFinished(f"session is {status}; cannot {command} a finished session")


def _forward(channel: str, command: dict) -> None:
    """Send `command` to `channel` and wait for its ack; raise `BusError` when none comes."""
    bus = get_bus()
    timeout = _forward_timeout()
    deadline = time.monotonic() + timeout
    with bus.mailbox_open() as reply:
        bus.send(channel, {**command, "reply_to": reply.name}, timeout=timeout)
        while (left := deadline - time.monotonic()) > 0:
            answer = reply.receive(left)
            if answer and answer.get("type") == "control.ack" and answer.get("seq") == command["seq"]:
                return
    raise BusError(f"the executor did not acknowledge within {timeout:g} s")


class ExecutorInbox:
    """The live executor's end of steering for one session (used by the run loop).

    `ExecutorInbox.open(session_id=…)` (org context required) opens a bus mailbox, stores
    its name as the session's `executor_channel` and starts a daemon receiver thread that,
    for each `control.command`, queues `{"command", "message", "payload", "seq"}` and then
    acks it on the command's `reply_to`. Use as a context manager or call `close()`.

    Over a process-local bus (the in-memory layer of `make run`, where the executor may be a
    django-q2 worker process) the receiver also reads the session's durable control log every
    `AGENTS_CONTROL_POLL_SECONDS`, so a command posted to any process still reaches the run;
    the sender then answers `forwarded: false` (recorded, drained from the log).
    """

    POLL_SECONDS = 0.2  # how often the receiver checks that it should stop

    def __init__(self, *, session_id: str, org: str, bus, mailbox, recorded: str = "", cursor: int = 0) -> None:
        self.session_id = session_id
        self.org = org
        self._bus = bus
        self._mailbox = mailbox
        self._recorded = recorded or mailbox.name
        self._cursor = cursor
        self._seen: set[int] = set()
        self._seen_lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._poll_log = bool(getattr(bus, "process_local", False))
        self._commands: queue.Queue[dict] = queue.Queue()
        self._stop = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._receive_loop, name=f"agents-inbox-{session_id}", daemon=True)

    @classmethod
    def open(cls, *, session_id: str) -> ExecutorInbox:
        """Open the inbox of session `session_id` in the current org; raise `SessionNotFound`.

        Two statements' worth of work: the mailbox, then the UPDATE that records its channel
        (and proves the session exists). The inbox's log cursor starts at 0: commands recorded
        before are read once more and dropped by `seq` (`advance` moves the cursor past a
        backlog its owner already read).
        """
        org = stores.current_org()
        if org is None:
            raise stores.NoOrgSelected("an executor inbox is opened for an org")
        if not session_id or len(session_id) > fields.MAX_ID:
            raise SessionNotFound()
        bus = get_bus()
        mailbox = bus.mailbox_open()
        recorded = f"{PROCESS_TAG}{_LOCAL_MARK}{mailbox.name}" if bus.process_local else mailbox.name
        cursor = 0
        try:
            services.session_set_executor_channel(session_id=session_id, channel=recorded)
        except BaseException:
            mailbox.close()
            raise
        inbox = cls(session_id=session_id, org=org, bus=bus, mailbox=mailbox, recorded=recorded, cursor=cursor)
        inbox._thread.start()
        return inbox

    @property
    def channel(self) -> str:
        """Return the executor channel as recorded on the session (what senders read)."""
        return self._recorded

    def advance(self, seqs) -> None:
        """Mark control events `seqs` as already handed over (a backlog the owner read itself).

        They are never queued again, and the durable log is read from past the highest of them.
        """
        with self._seen_lock:
            self._seen.update(seqs)
        with self._log_lock:
            self._cursor = max([self._cursor, *seqs])

    def _queue_once(self, command: dict) -> None:
        with self._seen_lock:
            if command.get("seq") in self._seen:
                return
            self._seen.add(command.get("seq"))
        self._commands.put(command)

    def _read_log(self, *, close: bool) -> None:
        """Queue control commands recorded after the cursor (the durable path)."""
        with self._log_lock:
            try:
                with stores.org_context(self.org):
                    events, self._cursor = control_events_after(session_id=self.session_id, after=self._cursor)
            except Exception:
                logger.warning("executor inbox of %s could not read its control log", self.session_id, exc_info=True)
                return
            finally:
                if close:  # the receiver thread's own connection; the caller's stays as it was
                    connections.close_all()
            for event in events:
                body = json.loads(event.payload or "{}")
                self._queue_once({"command": body.get("command"), "message": body.get("message"), "payload": body.get("payload"), "seq": event.seq})

    def _receive_loop(self) -> None:
        poll_log = self._poll_log
        interval = float(getattr(settings, "AGENTS_CONTROL_POLL_SECONDS", 1.0))
        next_read = time.monotonic() + interval
        while not self._stop.is_set():
            message = self._mailbox.receive(self.POLL_SECONDS)
            if poll_log and time.monotonic() >= next_read:
                self._read_log(close=True)
                next_read = time.monotonic() + interval
            if not message or message.get("type") != "control.command":
                continue
            self._queue_once({k: message.get(k) for k in ("command", "message", "payload", "seq")})
            reply_to = message.get("reply_to")
            if reply_to:
                try:
                    self._bus.send(reply_to, {"type": "control.ack", "seq": message.get("seq")}, timeout=_forward_timeout())
                except BusError:
                    logger.warning("executor inbox of %s could not ack command %s", self.session_id, message.get("seq"))

    def pending(self) -> list[dict]:
        """Return (and remove) every command received so far, oldest first; never blocks.

        Over a process-local bus it first reads the durable log, so a command recorded before
        this call is never missed by a loop checking between steps.
        """
        if self._poll_log and not self._closed:
            self._read_log(close=False)
        drained: list[dict] = []
        while True:
            try:
                drained.append(self._commands.get_nowait())
            except queue.Empty:
                return drained

    def wait(self, timeout: float) -> dict | None:
        """Return the next command, or None after `timeout` seconds without one."""
        try:
            return self._commands.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None

    def close(self) -> None:
        """Clear the session's executor channel (if still ours), stop the receiver (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            with stores.org_context(self.org):
                services.session_clear_executor_channel(session_id=self.session_id, channel=self.channel)
        except Exception:
            logger.warning("executor inbox of %s could not clear its channel", self.session_id, exc_info=True)
        self._stop.set()
        self._thread.join(timeout=self.POLL_SECONDS * 5)
        self._mailbox.close()

    def __enter__(self) -> ExecutorInbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
