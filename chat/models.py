"""Conversations and their messages (the org's own store; reference §1.10).

Routed by tenancy.db_router to the current org's database (label `chat` is an org app).
"""

from django.db import models

from agents_site.ids import mint_id
from agents_site.vocabulary import ChatRole, ShareSubject


def new_conversation_id() -> str:
    """Return a fresh conversation id, `conv_` + 32 hex."""
    return mint_id("conv")


def new_message_id() -> str:
    """Return a fresh message id, `msg_` + 32 hex."""
    return mint_id("msg")


class Conversation(models.Model):
    """A thread of turns; each round on it is a `chat` run.

    `busy_run_id` names the run of the round in flight on it ("" when none): a second round
    waits or is refused while that run is queued or running (`multitaskStrategy`). A lock whose
    run has finished or is gone is free (a crashed holder never blocks a thread).
    `turns` counts the messages ever appended: each message's `position` is its place.
    """

    id = models.CharField(primary_key=True, max_length=64, default=new_conversation_id, editable=False)
    title = models.CharField(max_length=80)
    created_by = models.CharField(max_length=300, default="", blank=True)
    busy_run_id = models.CharField(max_length=64, default="", blank=True)
    turns = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-updated_at", "-id"]

    def __str__(self) -> str:
        return f"{self.id} {self.title}"


class Message(models.Model):
    """One turn of a conversation: `role` (system, user, assistant, tool) and its text.

    `tool_calls` is the assistant's tool calls of its round (`{"actions": [...], "ops": [...]}`),
    None otherwise; `run_id` names the round's run ("" for a turn recorded without one).
    """

    id = models.CharField(primary_key=True, max_length=64, default=new_message_id, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    role = models.CharField(max_length=16, choices=ChatRole.choices)
    content = models.TextField(default="", blank=True)
    tool_calls = models.JSONField(null=True, blank=True)
    run_id = models.CharField(max_length=64, default="", blank=True, db_index=True)
    # An assistant turn cut short: `stopped` (the user stopped the round; what was written before
    # the stop is kept, marked, never passed off as a whole reply). "" for a whole turn.
    finish_reason = models.CharField(max_length=32, default="", blank=True)
    # A round's user turn, when its agent has approval rules: the whole opening prompt the model
    # got (`[{role, content}]`: instructions, the request's system text, the thread, the request's
    # messages), so a round resumed after an approval (issue 28) starts from exactly it.
    prompt = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["conversation", "position"]
        constraints = [models.UniqueConstraint(fields=["conversation", "position"], name="uq_chat_message_position")]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class ShareLink(models.Model):
    """A link anyone may read a conversation's or a session's turns with, until it expires or is revoked.

    The URL carries a token (`shr_<org>_<secret>`, 192 random bits) that is a credential: only
    its SHA-256 hex is stored (`token_hash`), so the store never holds what opens the page. The
    org in the token only tells which store to look in; the hash decides. `subject` and
    `subject_id` name what is shown (read live, so later turns show too); `created_by` is the
    actor who shared it (shown to readers as its subject); `revoked_at` ends access at once.
    """

    id = models.CharField(primary_key=True, max_length=64)
    token_hash = models.CharField(max_length=64, unique=True)
    subject = models.CharField(max_length=16, choices=ShareSubject.choices)
    subject_id = models.CharField(max_length=64)
    created_by = models.CharField(max_length=300)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=300, default="", blank=True)

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["subject", "subject_id", "created_at"], name="ix_share_subject")]

    def __str__(self) -> str:
        return f"{self.id} ({self.subject} {self.subject_id})"
