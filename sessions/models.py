"""Sessions, their ordered event log and the org's event clock (each org's own store).

A session is one agent's live activity; subagents hang under a parent and share the flow's
`root_id`, so a whole flow is one indexed read. Events are the session's turns, numbered by a
dense per-session `seq` (1..N) and by the org-wide `position` the live stream resumes from.
"""

from django.db import models

from agents_site.vocabulary import EventKind, SessionStatus


class Session(models.Model):
    """A live agent session (reference §1.5). `id` is `sess_` + 32 hex.

    A root has `parent_id == ""` and `root_id == id`; a child inherits its parent's `root_id`.
    `last_seq` is the seq of the newest event, so it is also the session's event count.
    `executor_channel` names the bus channel of the live executor of this session, if any
    (sessions.control): a steering command is forwarded there.
    """

    id = models.CharField(primary_key=True, max_length=64)
    agent = models.CharField(max_length=128)
    actor = models.CharField(max_length=256, default="", blank=True)
    status = models.CharField(max_length=16, choices=SessionStatus.choices, default=SessionStatus.RUNNING)
    # Why the run that ended this session ended (its `finishReason`: `stopped` for a user's stop,
    # which ends the session `error` but is not a failure); "" when no run said.
    finish_reason = models.CharField(max_length=32, default="", blank=True)
    parent_id = models.CharField(max_length=64, default="", blank=True)
    root_id = models.CharField(max_length=64)
    title = models.CharField(max_length=512, default="", blank=True)
    task_workflow_id = models.CharField(max_length=256, default="", blank=True)
    task_run_id = models.CharField(max_length=256, default="", blank=True)
    host = models.CharField(max_length=256, default="", blank=True)
    cwd = models.CharField(max_length=1024, default="", blank=True)
    repo = models.CharField(max_length=512, default="", blank=True)
    target = models.CharField(max_length=128, default="", blank=True)
    terminal = models.CharField(max_length=512, default="", blank=True)
    provider = models.CharField(max_length=64, default="", blank=True)
    account = models.CharField(max_length=256, default="", blank=True)
    project = models.CharField(max_length=128, default="", blank=True)
    published = models.BooleanField(default=False)
    executor_channel = models.CharField(max_length=200, default="", blank=True)
    last_seq = models.PositiveBigIntegerField(default=0)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [
            models.Index(fields=["root_id", "created_at"], name="ix_sessions_root"),
            models.Index(fields=["parent_id", "created_at"], name="ix_sessions_parent"),
            models.Index(fields=["status", "updated_at"], name="ix_sessions_status"),
            models.Index(fields=["project", "created_at"], name="ix_sessions_project"),
            models.Index(fields=["published", "updated_at"], name="ix_sessions_published"),
            models.Index(fields=["target"], name="ix_sessions_target"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.agent}, {self.status})"

    @property
    def is_finished(self) -> bool:
        """Return True when the status is terminal (`done`/`error`): it never reopens."""
        return self.status in SessionStatus.TERMINAL


class Event(models.Model):
    """One turn of a session's ordered log (reference §1.6). `id` is `evt_` + 32 hex.

    `seq` is dense per session (1..N). `position` is dense per org (1..M): it is the `id:` of
    the stream frame and the cursor `Last-Event-ID` resumes from. On SQLite the append takes it
    in its own transaction; on PostgreSQL the append stores NULL and the org's sequencer
    (`sessions.clock`) gives every committed event without one the next positions right after
    its commit, so `position` follows the order events became visible and a reader (who reads
    only positioned events, up to the clock) never passes over one that commits late.
    `payload` is compact JSON text ("" when the turn has none). `root_id` is the session's
    flow, copied so a `?root=` replay is one indexed read.
    """

    id = models.CharField(primary_key=True, max_length=64)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events", db_column="session_id")
    root_id = models.CharField(max_length=64)
    seq = models.PositiveBigIntegerField()
    position = models.PositiveBigIntegerField(unique=True, null=True, blank=True)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    actor = models.CharField(max_length=256, default="", blank=True)
    payload = models.TextField(default="", blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="ux_events_session_seq")]
        indexes = [
            models.Index(fields=["root_id", "position"], name="ix_events_root_position"),
            models.Index(fields=["session", "kind", "seq"], name="ix_events_session_kind_seq"),
            # The few committed events the sequencer has not positioned yet (PostgreSQL only ever).
            models.Index(fields=["session", "seq"], name="ix_events_unpositioned", condition=models.Q(position__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.kind}"


class EventClock(models.Model):
    """The org's event clock: one row (`id = 1`) holding the last `position` handed out.

    On SQLite every append increments it inside its transaction (appends are serialised by
    `BEGIN IMMEDIATE` anyway). On PostgreSQL no append touches it: the org's sequencer
    (`sessions.clock.sequence`, one short transaction under a per-org advisory lock, run after
    each append's commit) positions every committed event that has none and moves the clock in
    the same commit. Either way positions are dense and a position ≤ the clock is committed:
    a stream that has seen position p has seen, or can read from the store, every position below p.
    """

    id = models.PositiveSmallIntegerField(primary_key=True)
    last = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"event clock at {self.last}"


class PositionGap(models.Model):
    """Positions `after + 1 … until − 1` of the org's log that no event holds, and never will.

    Written when the org's store is restored to a moment (`manage.py restore_org`): the log is
    back at the moment's head (`after`) while clients may hold positions handed out later (by
    the store that was replaced). The clock moves on to `until` (the head a `reset` frame then
    names; no event holds it either), so no new event ever reuses such a position, and a
    `Last-Event-ID` inside a gap opens the stream with a `reset` frame instead of resuming
    silently over events that are gone.
    """

    after = models.PositiveBigIntegerField()
    until = models.PositiveBigIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["after"]

    def __str__(self) -> str:
        return f"positions {self.after + 1}–{self.until - 1} void"
