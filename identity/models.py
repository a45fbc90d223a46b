"""Identity agents (spec 001) and everything they own: all in the creating org's store.

An identity agent is an `agents.Agent` with `hosting = external`; its identity fields live on
`IdentityProfile` (one-to-one). Credentials, keys, rotations, relations, envelopes, deliveries
and inbox items name the agent by its id (a plain column, not a foreign key) so that a cascade
delete keeps them: relations marked terminated, envelopes stored, credentials revoked.
Routed by `tenancy.db_router` to the current org's database (`identity` is an org app).
"""

from django.db import models

from agents.models import Agent
from agents_site.vocabulary import (
    AgentHealth,
    AnomalyKind,
    ConnectionMode,
    EnvelopeDirection,
    IdentityCategory,
    InboxItemKind,
    RelationStatus,
    SystemMessageCode,
    SystemMessageType,
)
from webhooks.models import AttemptFields, DeliveryFields


class IdentityProfile(models.Model):
    """The identity fields of an external agent (spec 001 creation form) and its creator.

    `creator_id` is the creating principal's subject (username, or the gateway JWT's `sub`);
    only that user lists, edits, rotates and deletes it through `/v1/identity/`.
    """

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, primary_key=True, related_name="identity")
    display_name = models.CharField(max_length=32)
    bio = models.CharField(max_length=500, default="", blank=True)
    avatar_url = models.CharField(max_length=2048, default="", blank=True)
    category = models.CharField(max_length=16, choices=IdentityCategory.choices, default="", blank=True)
    connection_mode = models.CharField(max_length=16, choices=ConnectionMode.choices)
    webhook_url = models.CharField(max_length=2048, default="", blank=True)
    health_check_url = models.CharField(max_length=2048, default="", blank=True)
    creator_id = models.CharField(max_length=300, db_index=True)
    health = models.CharField(max_length=16, choices=AgentHealth.choices, default=AgentHealth.UNKNOWN)
    health_detail = models.CharField(max_length=300, default="", blank=True)
    health_checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.display_name} ({self.agent_id})"


class AgentCredential(models.Model):
    """One agent token: `agt_<org>_<token_id>_<secret>`; only bcrypt(secret) is stored.

    `token_id` (non-secret) selects the row; bcrypt (cost 10) checks the secret. Valid while
    `revoked_at` is unset and `expires_at` is unset or in the future (a normal rotation sets it
    to now + the grace period; an emergency rotation or a delete sets `revoked_at`).
    """

    token_id = models.CharField(max_length=32, unique=True)
    agent_id = models.CharField(max_length=64, db_index=True)
    token_hash = models.CharField(max_length=100)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"agt_…{self.token_id} ({self.agent_id})"


class PublicKeySet(models.Model):
    """The fields every registered key set has (an agent's or a user's): X25519 `public_key` and
    Ed25519 `signing_public_key` (base64 of 32 bytes) and validity (`identity.keys.keyset_status`:
    current, grace until `expires_at`, expired, revoked)."""

    public_key = models.CharField(max_length=64)
    signing_public_key = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]


class AgentKeySet(PublicKeySet):
    """Public keys an agent registered (X25519 `public_key`, Ed25519 `signing_public_key`,
    base64) and its webhook secret, Fernet-encrypted under the deployment key.

    Same validity rule as `AgentCredential`: superseded sets stay valid through the grace
    period of a normal rotation; an emergency rotation or a delete revokes them at once.
    """

    agent_id = models.CharField(max_length=64, db_index=True)
    webhook_secret_encrypted = models.TextField(default="", blank=True)

    class Meta(PublicKeySet.Meta):
        verbose_name = "agent key set"

    def __str__(self) -> str:
        return f"keys of {self.agent_id} ({self.created_at:%Y-%m-%d})"


class UserKeySet(PublicKeySet):
    """Public keys a user registered in this org (`PUT /v1/identity/users/me/keys`): X25519
    `public_key` (agents seal replies to it) and Ed25519 `signing_public_key` (agents verify the
    user's envelopes with it), base64 of 32 bytes. The private halves never leave the user's browser.

    A new set makes the previous current one enter its grace period (`expires_at`, like a normal
    rotation: replies sealed to it still open). An agent reads a user's keys only while the user
    has an active relation with it.
    """

    user_id = models.CharField(max_length=300, db_index=True)

    class Meta(PublicKeySet.Meta):
        verbose_name = "user key set"

    def __str__(self) -> str:
        return f"keys of {self.user_id} ({self.created_at:%Y-%m-%d})"


class TokenRotation(models.Model):
    """One token rotation, durable: the 5-per-24-h limit counts these rows."""

    agent_id = models.CharField(max_length=64, db_index=True)
    emergency = models.BooleanField(default=False)
    actor = models.CharField(max_length=300, default="", blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.agent_id} rotated{' (emergency)' if self.emergency else ''}"


class Relation(models.Model):
    """A human-to-agent relation (H2A): user `user_id` added identity agent `agent_id`.

    At most one active relation per (agent, user). Removed by the user, or terminated by the
    agent's deletion (kept, never deleted).
    """

    agent_id = models.CharField(max_length=64, db_index=True)
    user_id = models.CharField(max_length=300, db_index=True)
    status = models.CharField(max_length=32, choices=RelationStatus.choices, default=RelationStatus.ACTIVE)
    created_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent_id", "user_id"], condition=models.Q(status="active"), name="uniq_active_relation"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user_id} ↔ {self.agent_id} ({self.status})"


class Envelope(models.Model):
    """A sealed envelope (docs/envelopes.md, v1) between a user and an identity agent.

    The platform stores and forwards it and never decrypts it: it reads only the outer header
    (version, parties, key ids, message id). `sender` (`user:<id>` or `agent:<id>`) and
    `message_id` are unique together — a repeated (sender, message id) is refused (409); rows
    from before v1 have neither. `pk` orders envelopes (and is the
    WebSocket delivery order); `acked_at` is set when a WebSocket agent acknowledged it (a
    webhook agent's envelopes are tracked by their `Delivery`). Kept
    `AGENTS_ENVELOPE_RETENTION_DAYS`, also after the agent is deleted.
    """

    public_id = models.CharField(max_length=64, unique=True)
    direction = models.CharField(max_length=16, choices=EnvelopeDirection.choices)
    agent_id = models.CharField(max_length=64, db_index=True)
    user_id = models.CharField(max_length=300, db_index=True)
    body = models.TextField()
    size_bytes = models.PositiveIntegerField()
    sender = models.CharField(max_length=310, default="", blank=True)
    message_id = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(db_index=True)
    acked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["agent_id", "direction", "acked_at", "id"], name="ix_env_agent_pending"),
            models.Index(fields=["agent_id", "user_id", "id"], name="ix_env_conversation"),
        ]
        constraints = [models.UniqueConstraint(fields=["sender", "message_id"], name="uniq_envelope_sender_mid")]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.direction}, {self.size_bytes} bytes)"


class Delivery(DeliveryFields):
    """One webhook delivery to an identity agent (an envelope, or a `security_alert`): attempts,
    backoff, dead letter, replays — made by the shared engine (`webhooks.engine`, channel `identity`).

    `public_id` is the Standard Webhooks `webhook-id` (the same on every retry, so receivers
    can de-duplicate). `next_attempt_at` is when the next attempt is due while `retrying`.
    `envelope` is empty for a system message (`event_type` `security_alert`).
    """

    agent_id = models.CharField(max_length=64, db_index=True)
    envelope = models.ForeignKey(Envelope, on_delete=models.CASCADE, related_name="deliveries", null=True, blank=True)
    # A security alert sent after an emergency rotation revoked the agent's keys is signed with the
    # secret the agent had (the only one it can verify with), kept here encrypted; "" = the agent's current one.
    signing_secret_encrypted = models.TextField(default="", blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "deliveries"

    def __str__(self) -> str:
        return f"{self.public_id} ({self.status})"


class DeliveryAttempt(AttemptFields):
    """One HTTP attempt of a delivery: status code or error, ≤ 4 KiB of the answer (masked), duration."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")

    class Meta:
        ordering = ["delivery_id", "number"]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}: {self.status_code or self.error}"


class InboxItem(models.Model):
    """One item of a user's identity inbox: an envelope from an agent, or a system message.

    System messages are the platform's notifications (`security_alert` /
    `agent.deleted_by_creator` after a cascade delete). `pk` is the inbox cursor and the SSE
    `id:` of the inbox stream.
    """

    user_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=16, choices=InboxItemKind.choices)
    agent_id = models.CharField(max_length=64, db_index=True)
    envelope = models.ForeignKey(Envelope, on_delete=models.CASCADE, null=True, blank=True, related_name="inbox_items")
    system_type = models.CharField(max_length=32, choices=SystemMessageType.choices, default="", blank=True)
    system_code = models.CharField(max_length=64, choices=SystemMessageCode.choices, default="", blank=True)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["user_id", "id"], name="ix_inbox_user_id")]

    def __str__(self) -> str:
        return f"{self.user_id}: {self.system_code or self.kind}"


class IdentityLock(models.Model):
    """A row to lock (`SELECT … FOR UPDATE`) so that writers of one key take turns.

    Keys: `identity-quota:<user>` (the quota count and insert), `identity-rotate:<agent>` (the
    rotation limit), `identity-inbox:<user>` (inbox ids commit in order).
    """

    key = models.CharField(max_length=200, unique=True)

    def __str__(self) -> str:
        return self.key


class ClientAnomaly(models.Model):
    """A refusal a client's client_action executor reported (spec 001 security model).

    The client ignored or refused part of an artifact form — an endpoint off its canonical
    allow-list, an `auth` other than user_jwt/agent_token, a `params_from_response` that is not
    `$.field`, a reply asking for a forbidden field — and told the platform. Shown to org admins
    (console Anomalies page, Django admin). `detail` holds names only, never values.
    """

    user_id = models.CharField(max_length=300, db_index=True)
    kind = models.CharField(max_length=32, choices=AnomalyKind.choices)
    artifact_subtype = models.CharField(max_length=64, default="", blank=True)
    endpoint = models.CharField(max_length=300, default="", blank=True)
    conversation_id = models.CharField(max_length=64, default="", blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "client anomalies"

    def __str__(self) -> str:
        return f"{self.kind} by {self.user_id}"


class KeyBackup(models.Model):
    """One user's `encrypted_backup_blob_v2`: their agents' key bundle, encrypted in their browser.

    Opaque to the platform (a base64 string it never decodes beyond checking it is base64): the
    key that opens it is derived on the user's device (Passkey PRF, or the keystore password).
    One per user in the org; a PUT replaces it.
    """

    user_id = models.CharField(max_length=300, unique=True)
    blob = models.TextField()
    size_bytes = models.PositiveIntegerField()
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return f"backup of {self.user_id} ({self.size_bytes} bytes)"


class AgentManifest(models.Model):
    """An identity agent's capability manifest (docs/manifests.md, v1): an A2A agent card it signed
    with one of its registered Ed25519 keys, registered with its agent token. One per agent; a
    new registration replaces it. `signing_kid` is the key id whose signature verified."""

    agent_id = models.CharField(max_length=64, unique=True)
    card = models.JSONField()
    signing_kid = models.CharField(max_length=16)
    registered_at = models.DateTimeField()

    class Meta:
        ordering = ["-registered_at"]

    def __str__(self) -> str:
        return f"manifest of {self.agent_id} (signed by {self.signing_kid})"
