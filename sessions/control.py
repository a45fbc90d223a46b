"""Steering: record a control command, forward it to a live executor (spec 003: POST …/{id}/{command}).

Two sides, one bus (`sessions.bus.get_bus()`: the Channels layer, or in-process):

* The dashboard side, `control_send`: appends the durable `control` event FIRST, then — if
  the session has a live executor (`Session.executor_channel` non-empty) — forwards
  `{"type": "control.command", "session", "command", "message", "payload", "seq", "reply_to"}` to that
  channel and waits up to `AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS` (default 5) for
  `{"type": "control.ack", "seq"}` on `reply_to`. Acked → `forwarded` True; no ack or a
  failed send → 502 `forward_failed` "control recorded but forward failed: …" (the event
  stays recorded). A `stop` is sent with no `reply_to` and never waited on: `forwarded` is
  whether the bus took it, and the answer is 200 whatever the executor does (issue 25). A session with no executor yet is offered to the handlers higher layers
  register (`sessions.hooks.SessionObserver.take_command`): a task-backed session's queued run takes it (`stop`
  cancels a run not started, other commands are replayed when its executor attaches), a
  routed run no machine has claimed yet is withdrawn on `stop` — `forwarded` True. No
  executor and no handler → `forwarded` False: the running surface polls `GET …/{id}/control`.
* The executor side, `ExecutorInbox`: a run opens one for its session; the process's one
  receiver (`_Hub`) acks every command the moment it is queued, and the run drains them
  between steps with `pending()` or blocks on `wait(timeout)`.

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

from agents_site import permissions
from agents_site.errors import Forbidden, InvalidRequest
from agents_site.vocabulary import ControlCommand, EventKind, SessionStatus
from sessions import fields, hooks, services
from sessions.backends.base import BusError
from sessions.bus import get_bus
from sessions.errors import ForwardFailed, SessionFinished, SessionNotFound
from sessions.models import Event, Session
from sessions.presenters import event_view
from sessions.selectors import control_events_after, executor_channel, session_get
from tenancy import stores

logger = logging.getLogger(__name__)

STOP_REFUSED = "only the user who started the run or an org admin may stop it"
COMMAND_MESSAGE = "command must be " + "|".join(sorted(ControlCommand.STEERING, key=list(ControlCommand.values).index))


def _forward_timeout() -> float:
    return float(getattr(settings, "AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS", 5))


def control_send(*, session_id: str, command: str, message: str | None = None, payload=None, actor: str,
                 push: bool = False, owner_rule: dict | None = None) -> tuple[Event, bool]:
    """Record steering `command` on a session and forward it to its live executor, if any.

    Returns `(event, forwarded)`: the stored `control` event (payload
    `{"command", "message"?, "payload"?, "push"?}`) and whether a live executor acknowledged it;
    `push` (a `stop` only) is recorded as `"push": true`: a stopped coding run pushes its commits.
    `owner_rule` (`agents_site.permissions.owner_rule` of the caller): a `stop` of a session someone
    else started is 403 for a member (the permission table's `own`); None checks nothing (the
    platform's own stops). Order (reference §2.3): 404 `SessionNotFound` (unknown or another
    org's) → 403 a member's stop of another's run → 400 unknown
    command → 409 `SessionFinished` ("session is done; cannot pause a finished session") →
    400 "message too long" (16 KiB) → 400 "payload too large" (64 KiB) / invalid JSON →
    422 `SecretInTranscript` (the payload and the message are scanned)
    → 400 for `message` without a non-empty message or a payload → the session observers' guards
    (`sessions.hooks.SessionObserver.guard_command`: 409 `approval_pending` for a `resume` while an
    approval is pending) → append → forward.
    Raises `ForwardFailed` (502, extras `command` and `event`) when an executor is registered
    but did not acknowledge a `pause`, `resume` or `message`; the event is recorded regardless.
    A `stop` never waits for an ack and never raises it (issue 25 item 4): it is sent to the
    live executor's channel and `forwarded` says whether the bus took it. Org context required.
    """
    session = session_get(session_id=session_id)
    if command == ControlCommand.STOP and owner_rule is not None and not permissions.owns(owner_rule, started_by=session.actor):
        raise Forbidden(STOP_REFUSED)  # after the 404: another org's session and an unknown one answer alike
    if command not in ControlCommand.STEERING:  # approve/deny have their own service (runs.approvals)
        raise InvalidRequest(COMMAND_MESSAGE)
    _refuse_finished(session.status, command)
    message = fields.clean_message(message)
    fields.dump_payload(payload)
    services.refuse_secrets(payload)
    services.refuse_secrets(message)  # stricter than spec 003: a credential is stored nowhere
    if command == ControlCommand.MESSAGE and not message and payload is None:
        raise InvalidRequest("message requires a 'message' or 'payload'")
    for observer in hooks.observers():
        observer.guard_command(session=session, command=command)
    body: dict = {"command": command}
    if message is not None:
        body["message"] = message
    if payload is not None:
        body["payload"] = payload
    if push and command == ControlCommand.STOP:
        body["push"] = True
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
        for observer in hooks.observers():
            if observer.take_command(session=session, command=command, message=message):
                return event, True
        channel = executor_channel(session_id=session.id)  # its executor attached meanwhile
    if not channel:
        return event, False
    channel = _reachable(channel)
    if channel is None:
        # The executor lives in another process and the bus cannot leave this one (the
        # in-memory layer): it reads the command from the durable log between steps.
        return event, False
    forwarded = {"type": "control.command", "session": session.id, "command": command, "message": message, "payload": payload,
                 "push": body.get("push"), "seq": event.seq}
    if command == ControlCommand.STOP:
        return event, _hand_over(channel, forwarded)
    try:
        _forward(channel, forwarded)
    except BusError as exc:
        raise ForwardFailed(f"control recorded but forward failed: {exc}", command=command, event=event_view(event)) from exc
    return event, True


#: Identifies this process (`host:pid`) in the executor channel it records on a session.
PROCESS_TAG = f"{socket.gethostname()}:{os.getpid()}"
_LOCAL_MARK = "|"


def _retag_after_fork() -> None:
    global PROCESS_TAG
    PROCESS_TAG = f"{socket.gethostname()}:{os.getpid()}"  # a forked worker is another process


os.register_at_fork(after_in_child=_retag_after_fork)


def _reachable(recorded: str) -> str | None:
    """Return the bus channel of a recorded executor channel, or None if out of this process's reach.

    The executor records `"<host>:<pid>|<channel>"` (bare `<channel>` before issue 51). Over a
    process-local bus a name recorded by another process cannot be delivered to; over a shared
    bus (Redis) it can, from anywhere.
    """
    if _LOCAL_MARK not in recorded:
        return recorded
    tag, _, name = recorded.partition(_LOCAL_MARK)
    return name if tag == PROCESS_TAG or not getattr(get_bus(), "process_local", False) else None


def executor_process(recorded: str) -> str:
    """Return the `host:pid` of the process whose executor recorded channel `recorded` ("" when unknown).

    What the recovery sweep asks whether a run's executor is still alive (`runs.lease.process_gone`).
    Example: `"box:4242|specific.ab!cd"` → `"box:4242"`; `"specific.ab!cd"` → `""`.
    """
    tag, mark, _ = (recorded or "").partition(_LOCAL_MARK)
    return tag if mark else ""


def _refuse_finished(status: str, command: str) -> None:
    """Raise 409 `SessionFinished` when `status` is terminal: a run that ended cannot be steered."""
    if status in SessionStatus.TERMINAL:
        raise SessionFinished(f"session is {status}; cannot {command} a finished session")


def _hand_over(channel: str, command: dict) -> bool:
    """Send a `stop` to the executor's `channel` without waiting for its ack; return whether the
    bus took it (issue 25 item 4: the stop route answers 200 at once once the command is recorded).

    A stop is a durable intent: the run converges on its own (its inbox sets the run's stop the
    moment the command arrives, and the run ends `stopped`), so nothing is gained by waiting for
    an ack that under load can come after the timeout — that wait once turned a stop the run
    obeyed into a 502. A send the bus refuses is logged; the command stays recorded.
    """
    try:
        get_bus().send(channel, command, timeout=_forward_timeout())
    except BusError as exc:
        logger.warning("stop %s of session %s recorded but not handed over: %s", command.get("seq"), command.get("session"), exc)
        return False
    return True


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


def _received(body: dict, seq) -> dict:
    """Return a command as an inbox hands it over: `{command, message, payload, seq}`, plus `push: true` when the stop said so."""
    command = {"command": body.get("command"), "message": body.get("message"), "payload": body.get("payload"), "seq": seq}
    if body.get("push") is True:
        command["push"] = True
    return command


class _Hub:
    """The process's one receiver of steering commands, for every executor inbox it holds.

    One bus mailbox and one daemon thread per process (and bus), started on first use: an
    inbox registers its session here instead of opening a mailbox and starting a thread of its
    own (issue 16: a mailbox round trip and two threads per run). Every executor of the
    process records the same channel, `recorded`; a forwarded `control.command` names its
    `session`, and the thread queues it on that session's inbox and acks it on `reply_to` at
    once. A command for a session no inbox of this process holds is not acked, so its sender
    answers 502 `forward_failed` as it did for an executor that went away. Over a process-local
    bus the thread also reads each registered inbox's durable control log every
    `AGENTS_CONTROL_POLL_SECONDS` (commands posted to another process).
    """

    POLL_SECONDS = 0.2  # how often the thread wakes to read logs or notice it was retired

    def __init__(self, bus) -> None:
        self.bus = bus
        self.pid = os.getpid()
        self.mailbox = bus.mailbox_open()
        # Tagged with this process on every bus: the recovery sweep ends the runs of a process gone.
        self.recorded = f"{PROCESS_TAG}{_LOCAL_MARK}{self.mailbox.name}"
        self._inboxes: dict[str, ExecutorInbox] = {}
        self._lock = threading.Lock()
        self._retired = threading.Event()
        self._thread = threading.Thread(target=self._receive_loop, name="agents-executor-hub", daemon=True)
        self._thread.start()

    def register(self, inbox: ExecutorInbox) -> None:
        """Deliver the commands of `inbox.session_id` to `inbox` from now on."""
        with self._lock:
            self._inboxes[inbox.session_id] = inbox

    def unregister(self, inbox: ExecutorInbox) -> None:
        """Stop delivering to `inbox` (if it is still the one registered for its session)."""
        with self._lock:
            if self._inboxes.get(inbox.session_id) is inbox:
                del self._inboxes[inbox.session_id]

    def retire(self) -> None:
        """Stop the thread and close the mailbox (the process's bus was replaced)."""
        self._retired.set()

    def _receive_loop(self) -> None:
        poll_log = bool(getattr(self.bus, "process_local", False))
        next_read = time.monotonic()
        try:
            while not self._retired.is_set():
                try:
                    next_read = self._turn(poll_log, next_read)
                except Exception:  # one bad message or read must never stop steering for the process
                    logger.exception("the executor hub failed on a message; it goes on")
        finally:
            self.mailbox.close()

    def _turn(self, poll_log: bool, next_read: float) -> float:
        """Wait up to `POLL_SECONDS` for one message and deliver it; read the logs when due. Return the next read time."""
        message = self.mailbox.receive(self.POLL_SECONDS)
        if poll_log and time.monotonic() >= next_read:
            with self._lock:
                inboxes = list(self._inboxes.values())
            for inbox in inboxes:
                inbox._read_log(close=False)
            if inboxes:
                connections.close_all()  # this thread's own connections, between reads
            next_read = time.monotonic() + float(getattr(settings, "AGENTS_CONTROL_POLL_SECONDS", 0.5))
        if not message or message.get("type") != "control.command":
            return next_read
        with self._lock:
            inbox = self._inboxes.get(message.get("session") or "")
        if inbox is None:
            return next_read  # no executor of that session here (any more): the sender times out
        # Queued, then acked: `forwarded: true` means the executor holds the command. An
        # executor may act on it and close at once; its close waits for this ack to leave.
        with inbox._delivering:
            inbox._queue_once(_received(message, message.get("seq")))
            reply_to = message.get("reply_to")
            if reply_to:
                try:
                    self.bus.send(reply_to, {"type": "control.ack", "seq": message.get("seq")}, timeout=_forward_timeout())
                except BusError:
                    logger.warning("executor inbox of %s could not ack command %s", inbox.session_id, message.get("seq"))
        return next_read


_hub: _Hub | None = None
_hub_lock = threading.Lock()


def executor_hub() -> _Hub:
    """Return this process's steering hub for its current bus, starting it on first use.

    A forked child (django-q2's workers) or a replaced bus (settings changed) gets a new hub;
    the one it replaces stops.
    """
    global _hub
    bus = get_bus()
    hub = _hub
    if hub is not None and hub.bus is bus and hub.pid == os.getpid():
        return hub
    with _hub_lock:
        hub = _hub
        if hub is None or hub.bus is not bus or hub.pid != os.getpid():
            if hub is not None and hub.pid == os.getpid():
                hub.retire()
            hub = _hub = _Hub(bus)
        return hub


def executor_channel_for_new_session() -> str:
    """Return the executor channel to record on a session its executor will attach to in this
    process at once (`ExecutorInbox.attach`): the session is opened with it, so attaching
    writes nothing and no command can be recorded before the channel is."""
    return executor_hub().recorded


class ExecutorInbox:
    """The live executor's end of steering for one session (used by the run loop).

    `ExecutorInbox.open(session_id=…)` (org context required) records the process's steering
    channel as the session's `executor_channel` and registers the session with the process's
    hub (`_Hub`), whose one thread queues each `control.command` for it and acks it; the
    run drains them between steps with `pending()` or blocks on `wait(timeout)`.
    `ExecutorInbox.attach(session_id=…)` registers a session that was opened with the channel
    already recorded (`executor_channel_for_new_session`): nothing is written or read. Use as a
    context manager or call `close()`.

    Over a process-local bus (the in-memory layer of `make run`, where the executor may be a
    django-q2 worker process) the session's durable control log is also read — by the hub
    every `AGENTS_CONTROL_POLL_SECONDS` and by `pending()` — so a command posted to any
    process still reaches the run; the sender then answers `forwarded: false` (recorded,
    drained from the log).
    """

    def __init__(self, *, session_id: str, org: str, hub: _Hub, cursor: int = 0) -> None:
        self.session_id = session_id
        self.org = org
        self._hub = hub
        self._recorded = hub.recorded
        self._cursor = cursor
        self._seen: set[int] = set()
        self._seen_lock = threading.Lock()
        self._log_lock = threading.Lock()
        self._poll_log = bool(getattr(hub.bus, "process_local", False))
        self._commands: queue.Queue[dict] = queue.Queue()
        self._delivering = threading.Lock()  # held by the hub while it queues and acks a command
        self._closed = False
        self._watchers: list = []

    @classmethod
    def open(cls, *, session_id: str) -> ExecutorInbox:
        """Open the inbox of session `session_id` in the current org; raise `SessionNotFound`.

        One statement: the UPDATE that records the process's channel on the session (and
        proves the session exists). The inbox's log cursor starts at 0: commands recorded
        before are read once more and dropped by `seq` (`advance` moves the cursor past a
        backlog its owner already read).
        """
        org = _inbox_org(session_id)
        hub = executor_hub()
        inbox = cls(session_id=session_id, org=org, hub=hub)
        hub.register(inbox)  # before the channel is recorded: a command forwarded at once finds it
        try:
            services.session_set_executor_channel(session_id=session_id, channel=hub.recorded)
        except BaseException:
            hub.unregister(inbox)
            raise
        return inbox

    @classmethod
    def attach(cls, *, session_id: str) -> ExecutorInbox:
        """Take the commands of a session opened with `executor_channel_for_new_session()`.

        No statement: the channel is already recorded, so every command is forwarded here (or,
        over a process-local bus, read from the log from its start). Org context required.
        """
        org = _inbox_org(session_id)
        inbox = cls(session_id=session_id, org=org, hub=executor_hub())
        inbox._hub.register(inbox)
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

    def watch(self, callback) -> None:
        """Call `callback(command)` with each command the moment it is received, on the receiving
        thread (the hub's, or the caller of `pending()`), before the run drains it.

        The run's stop watcher (issue 25): a `stop` must interrupt the model call or command in
        flight, not wait for the next step. A callback must be quick and must not raise (what it
        raises is logged).
        """
        self._watchers.append(callback)

    def _queue_once(self, command: dict) -> None:
        with self._seen_lock:
            if command.get("seq") in self._seen:
                return
            self._seen.add(command.get("seq"))
        self._commands.put(command)
        for callback in list(self._watchers):
            try:
                callback(command)
            except Exception:
                logger.warning("executor inbox of %s: a command watcher failed", self.session_id, exc_info=True)

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
                if close:  # the calling thread's own connection; a run's stays as it was
                    connections.close_all()
            for event in events:
                body = json.loads(event.payload or "{}")
                self._queue_once(_received(body, event.seq))

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

    def close(self, *, cleared: bool = False) -> None:
        """Stop taking commands; clear the session's executor channel if it is still this
        process's (idempotent). `cleared=True`: the caller already cleared it (a run's session
        ended in the run's own transaction), so nothing is written."""
        if self._closed:
            return
        self._closed = True
        self._hub.unregister(self)
        if self._delivering.acquire(timeout=_forward_timeout()):  # a command being acked leaves first
            self._delivering.release()
        if cleared:
            return
        try:
            with stores.org_context(self.org):
                services.session_clear_executor_channel(session_id=self.session_id, channel=self.channel)
        except Exception:
            logger.warning("executor inbox of %s could not clear its channel", self.session_id, exc_info=True)

    def __enter__(self) -> ExecutorInbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _inbox_org(session_id: str) -> str:
    org = stores.current_org()
    if org is None:
        raise stores.NoOrgSelected("an executor inbox is opened for an org")
    if not session_id or len(session_id) > fields.MAX_ID:
        raise SessionNotFound()
    return org
