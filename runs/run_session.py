"""The thin seam between a run and its live session (issue 4 item 4, spec 003 POST …/run).

The run lifecycle (`runs.lifecycle.run_start`) opens a run's root session (`agent` =
the agent's name, `title` = the start of the input); the executor attaches to it here, appends `message` / `tool-call` / `log` events as it goes, reports `paused` /
`running` while it is held, and ends the session `done` or `error`. While it runs, an executor
inbox (`sessions.control.ExecutorInbox`) delivers the pause/resume/stop/message commands posted
to the session, so those commands answer `forwarded: true`.

Every call here is best-effort: a bookkeeping failure in the session is logged and swallowed,
and never fails the run (the run and its billing already happened). With the sessions
capability absent the seam records nothing and its inbox is always empty.
"""

from __future__ import annotations

import json
import logging
import time

from agents_site.vocabulary import EventKind, SessionStatus
from toolkit.events import clip  # noqa: F401  (the one clip, shared with the runner; callers import it from here)
from sessions.control import ExecutorInbox
from sessions.selectors import control_commands, control_events_after, session_get
from sessions.services import append_checked_turns, session_end, session_stream_delta, session_update
from sessions import services as session_services  # check_turn read at call time: tests inject store faults there
from tenancy import stores

logger = logging.getLogger(__name__)

TITLE_BYTES = 120


def session_title(text: str) -> str:
    """Return a session title: `text` trimmed, cut to 120 bytes (whole characters), or "agent run"."""
    title = (text or "").strip().encode()[:TITLE_BYTES].decode(errors="ignore").strip()
    return title or "agent run"


class RunSession:
    """One run's session: `session_id` ("" when none could be opened) and its inbox.

    Build with `RunSession.attach(...)` (or `bind` to record only); every method swallows its own failures.
    """

    def __init__(self, *, actor: str) -> None:
        self.session_id = ""
        self.actor = actor
        self._inbox = None
        self._backlog: list[dict] = []  # commands recorded before the executor attached
        self._seen: set[int] = set()  # seqs already handed to the loop (replay + live dedupe)
        self._root: str | None = None  # the session's flow, read once for live delta frames
        self._held_turns: list[tuple] = []  # (kind, payload) held for the next write (`append(last=True)`)

    @classmethod
    def bind(cls, *, session_id: str, actor: str) -> RunSession:
        """Return the seam to an existing session without an inbox (to record and close it)."""
        session = cls(actor=actor)
        session.session_id = session_id
        return session

    @classmethod
    def attach(cls, *, session_id: str, actor: str, opened_here: bool = False, root: str | None = None,
               inbox=None, after: int = 0) -> RunSession:
        """Take over the run's session (opened by `run_start`) and open its executor inbox.

        `opened_here`: `run_start` opened the session with this process's executor channel
        (`executor_here=True`, a run executed at once): attaching writes and reads nothing.
        Otherwise (a queued run a worker takes) the channel is recorded now, and commands
        recorded on the session before the executor attached (a `pause` or `message` sent
        while the run waited in the queue) are replayed first, oldest first; a command that
        also arrives live is handed over once (by `seq`). `root` is the session's root session
        id when the caller knows it (else it is read once, at the first delta); `inbox` the
        executor inbox `run_start` already registered for an `opened_here` session. `after`: a
        resumed run replays only the commands recorded after this seq (the ones before were applied).
        """
        session = cls(actor=actor)
        session.session_id = session_id
        session._root = root or None
        try:
            if opened_here:
                session._inbox = inbox if inbox is not None else ExecutorInbox.attach(session_id=session_id)
            else:
                session._inbox = ExecutorInbox.open(session_id=session_id)
        except Exception:
            logger.warning("run session %s: executor inbox unavailable", session_id, exc_info=True)
        if opened_here:
            return session
        try:
            events, _ = control_events_after(session_id=session_id, after=after)
            if session._inbox is not None and after:
                session._inbox.advance([after])
            for event in events:
                body = json.loads(event.payload or "{}")
                session._backlog.append(
                    {"command": body.get("command"), "message": body.get("message"), "payload": body.get("payload"), "seq": event.seq,
                     **({"push": True} if body.get("push") is True else {})}
                )
            if session._inbox is not None and events:
                session._inbox.advance([event.seq for event in events])
        except Exception:
            logger.warning("run session %s: earlier commands unreadable", session_id, exc_info=True)
        return session

    def _fresh(self, commands: list[dict]) -> list[dict]:
        fresh = []
        for command in commands:
            seq = command.get("seq")
            if seq in self._seen:
                continue
            if seq is not None:
                self._seen.add(seq)
            fresh.append(command)
        return fresh

    def append(self, kind: EventKind, payload: dict, *, last: bool = False) -> None:
        """Append one event (`message`, `tool-call`, `log`…) with a JSON-able `payload`.

        `last=True` marks what may be the run's last turn (its reply): it is held and written
        with the next event, or with the summary in the run's finish (`close`) — one
        transaction for both instead of two. Events always keep their order.
        """
        if not self.session_id:
            return
        self._held_turns.append((kind, payload))
        if not last:
            self._write_held()

    def _write_held(self, *extra: tuple[EventKind, dict]) -> None:
        """Write the held turns and `extra` in order, in one transaction; a turn refused is left out."""
        turns, self._held_turns = [*self._held_turns, *extra], []
        if not turns or not self.session_id:
            return

        checked = []
        for kind, payload in turns:
            try:
                json.dumps(payload)
                checked.append(session_services.check_turn(kind=str(kind), payload=payload, actor=self.actor))
            except Exception:
                logger.warning("run session %s: %s event not recorded", self.session_id, kind, exc_info=True)
        try:
            append_checked_turns(session_id=self.session_id, turns=checked)
        except Exception:
            logger.warning("run session %s: %d event(s) not recorded", self.session_id, len(checked), exc_info=True)

    def prime(self) -> None:
        """Read the session's flow (its root session id) now if it is not known, so the live delta
        frames (`delta`) read nothing: they are sent while the model writes, on the event loop
        when the run waits there (`runs.drive`)."""
        if not self.session_id or self._root is not None:
            return
        try:
            self._root = session_get(session_id=self.session_id).root_id or self.session_id
        except Exception:
            logger.warning("run session %s: flow unreadable", self.session_id, exc_info=True)

    def delta(self, text: str, *, run_id: str) -> None:
        """Show one piece of the reply being written (masked) to the session's watchers, live.

        An ephemeral `event: delta` frame of the session stream: not stored, not replayed (the
        whole reply is appended as a `message` event when it is complete).
        """
        if not self.session_id or not text:
            return
        try:
            if self._root is None:
                self._root = session_get(session_id=self.session_id).root_id or self.session_id
            session_stream_delta(session_id=self.session_id, root_id=self._root, run_id=run_id, text=text)
        except Exception:
            logger.warning("run session %s: delta not published", self.session_id, exc_info=True)

    def set_status(self, status: SessionStatus) -> None:
        """Report the session's live status (`paused`, `running`) or its end (`done`, `error`)."""
        if not self.session_id:
            return
        self._write_held()
        try:
            session_update(session_id=self.session_id, status=str(status))
        except Exception:
            logger.warning("run session %s: status %s not recorded", self.session_id, status, exc_info=True)

    def pending(self) -> list[dict]:
        """Return the steering commands delivered since the last call (oldest first), or []."""
        backlog, self._backlog = self._backlog, []
        if self._inbox is None:
            return self._fresh(backlog)
        try:
            return self._fresh(backlog + list(self._inbox.pending() or []))
        except Exception:
            logger.warning("run session %s: inbox read failed", self.session_id, exc_info=True)
            return self._fresh(backlog)

    def on_command(self, callback) -> None:
        """Call `callback(command)` the moment each steering command is received (on the receiving
        thread), before the loop drains it with `pending()`; commands recorded before the executor
        attached are passed at once. Used by the run's stop watcher (issue 25)."""
        for command in list(self._backlog):
            try:
                callback(command)
            except Exception:
                logger.warning("run session %s: command watcher failed", self.session_id, exc_info=True)
        if self._inbox is not None:
            try:
                self._inbox.watch(callback)
            except Exception:
                logger.warning("run session %s: command watcher not registered", self.session_id, exc_info=True)

    def wait(self, timeout: float) -> dict | None:
        """Wait up to `timeout` seconds for the next command; return it, or None."""
        while self._backlog:
            fresh = self._fresh([self._backlog.pop(0)])
            if fresh:
                return fresh[0]
        if self._inbox is None:
            time.sleep(max(timeout, 0))
            return None
        deadline = time.monotonic() + max(timeout, 0)
        try:
            while True:
                command = self._inbox.wait(max(deadline - time.monotonic(), 0))
                if command is None or self._fresh([command]):
                    return command
        except Exception:
            logger.warning("run session %s: inbox wait failed", self.session_id, exc_info=True)
            time.sleep(max(deadline - time.monotonic(), 0))
            return None

    def actor_of(self, seq: int | None) -> str:
        """Return who recorded the control command with `seq` ("" when it cannot be read)."""
        if not self.session_id or not seq:
            return ""
        try:
            events, _ = control_commands(session_id=self.session_id, after=int(seq) - 1)
            return next((e.actor for e in events if e.seq == int(seq)), "")
        except Exception:
            logger.warning("run session %s: actor of command %s unreadable", self.session_id, seq, exc_info=True)
            return ""

    def release(self) -> None:
        """Stop listening for commands without ending the session (its run was finished elsewhere);
        held turns are written first."""
        self._write_held()
        inbox, self._inbox = self._inbox, None
        if inbox is not None:
            _close_inbox(inbox, self.session_id, cleared=False)

    def close(self, *, status: SessionStatus, summary: dict | None = None) -> None:
        """Write the held turns and the run's `summary` `log` event, end the session `done`/`error`
        and stop listening for commands.

        Called only by the run lifecycle's `run_finish` (the one place a run's session ends),
        inside its transaction: the turns, the end (which also clears the executor channel) and
        the run's outcome commit together. Once the session is finished every command is
        refused (409), so nothing can reach the inbox as it is let go.
        """
        if self.session_id:
            self._write_held(*([(EventKind.LOG, summary)] if summary is not None else []))
            try:
                with stores.org_atomic():  # a savepoint: a failure here never undoes the run's finish
                    reason = summary.get("finishReason") if isinstance(summary, dict) else ""
                    session_end(session_id=self.session_id, status=str(status), finish_reason=reason if isinstance(reason, str) else "")
            except Exception:
                logger.warning("run session %s: end %s not recorded", self.session_id, status, exc_info=True)
        inbox, self._inbox = self._inbox, None
        if inbox is not None:
            _close_inbox(inbox, self.session_id, cleared=True)


def _close_inbox(inbox, session_id: str, *, cleared: bool) -> None:
    try:
        inbox.close(cleared=cleared)
    except Exception:
        logger.warning("run session %s: inbox close failed", session_id, exc_info=True)
