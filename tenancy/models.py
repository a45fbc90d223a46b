"""Orgs, memberships and API keys. These live in the default database."""

import re

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from agents_site.vocabulary import ApiKeyScope, InvitationState, ReplicaGenerationEnd, RestoreStatus

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class Org(models.Model):
    """A tenant. `slug` names its store and matches `^[a-z0-9][a-z0-9-]{0,62}$`."""

    slug = models.CharField(max_length=63, unique=True, validators=[RegexValidator(SLUG_RE)])
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's membership of an org; `is_admin` makes the user an org admin."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="memberships")
    is_admin = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "org"], name="uniq_membership_user_org")]

    def __str__(self) -> str:
        return f"{self.user} in {self.org}{' (admin)' if self.is_admin else ''}"


class ApiKey(models.Model):
    """An API key bound to one user and one org. Only its SHA-256 hex is stored.

    The key itself (`ak_` + 48 hex) is shown once, when created (`tenancy.services.api_key_create`).
    `scope` limits the paths it may call (`ApiKeyScope`: `all`, or `openai` = only the
    OpenAI-compatible endpoint, 403 elsewhere); `allowed_agents` (names or ids; empty = every
    agent) limits an `openai` key to those agents there (another is 404 `model_not_found`).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_keys")
    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True, default="")
    prefix = models.CharField(max_length=16, help_text="first characters of the key, for recognising it")
    key_hash = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=16, choices=ApiKeyScope.choices, default=ApiKeyScope.ALL)
    allowed_agents = models.JSONField(default=list, blank=True, help_text="agent names or ids; empty = every agent")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"
        verbose_name_plural = "API keys"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user} @ {self.org})"


class Invitation(models.Model):
    """A link that lets one existing user join `org` (as a member, or an admin), once, before it expires.

    The link's token (`inv_` + 43 URL-safe characters) is shown once, to the admin who made it;
    only its SHA-256 hex is stored. Accepting it (`tenancy.services.invitation_accept`) stamps
    `accepted_at`/`accepted_by`; an accepted, revoked or expired invitation lets nobody in.
    """

    org = models.ForeignKey(Org, on_delete=models.CASCADE, related_name="invitations")
    token_hash = models.CharField(max_length=64, unique=True)
    is_admin = models.BooleanField(default=False, help_text="the user joins as an org admin")
    note = models.CharField(max_length=200, blank=True, default="", help_text="who the link is for (shown to admins only)")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation to {self.org}{' as admin' if self.is_admin else ''}"

    def state(self, now) -> str:
        """Return `InvitationState` of this invitation at `now`."""
        if self.accepted_at is not None:
            return InvitationState.ACCEPTED
        if self.revoked_at is not None:
            return InvitationState.REVOKED
        if self.expires_at <= now:
            return InvitationState.EXPIRED
        return InvitationState.PENDING


class OrgPlacement(models.Model):
    """Which PostgreSQL server holds an org's database (`AGENTS_ORG_DATABASE_SERVERS`), recorded once.

    Written when the org's database is first created (PostgreSQL org mode) and never changed by
    the code: a server removed from the setting makes the org's store fail loudly rather than be
    created afresh elsewhere. `server` is the server's `host:port`; `database` the database name.
    Keyed by slug (not a foreign key): a store can exist before or without its `Org` row.
    """

    slug = models.CharField(max_length=63, unique=True, validators=[RegexValidator(SLUG_RE)])
    server = models.CharField(max_length=255, help_text="host:port of the PostgreSQL server holding the org's database")
    database = models.CharField(max_length=63)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return f"{self.slug} on {self.server}"


class ReplicaGeneration(models.Model):
    """One unbroken line of an org store's continuous backup (SQLite mode, `manage.py replicate`).

    Litestream ships the org file's WAL to `replica_url` from `started_at` on. A restore ends the
    generation (`ended_at`, `end_reason=restored`) and the restored file starts a new one at a new
    URL, so the replica of the old line is never overwritten and stays restorable to any moment of
    its life; removing the org ends it with `removed`. An ended generation's replica is deleted
    `AGENTS_BACKUP_RETENTION_DAYS` after `ended_at` (`pruned_at`). Keyed by slug, not a foreign
    key: a replica outlives its org's row. `name` is the generation's path part (`g` + UTC time).
    """

    slug = models.CharField(max_length=63, validators=[RegexValidator(SLUG_RE)])
    name = models.CharField(max_length=32)
    replica_url = models.CharField(max_length=1000)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=16, choices=ReplicaGenerationEnd.choices, blank=True, default="")
    pruned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["slug", "-started_at"]
        constraints = [
            models.UniqueConstraint(fields=["slug", "name"], name="uniq_replica_generation_slug_name"),
            models.UniqueConstraint(fields=["slug"], condition=models.Q(ended_at__isnull=True),
                                    name="uniq_replica_generation_current"),
        ]

    def __str__(self) -> str:
        return f"{self.slug} {self.name}{'' if self.ended_at is None else f' ({self.end_reason})'}"


class OrgRestore(models.Model):
    """One restore of an org's store to a moment (`manage.py restore_org`), kept as a record.

    While `status` is `running` the org answers 503 `store_unavailable` (`condition:
    restoring`) in every process. `moment` is the moment asked for (None: the latest);
    `restored_head` the org's event position at that moment and `position_floor` the position
    the event clock was moved to (every position in between is void: a `Last-Event-ID` there
    gets the stream's `reset` frame). `error` names the cause of a failure (nothing changed).
    """

    slug = models.CharField(max_length=63, validators=[RegexValidator(SLUG_RE)])
    moment = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=RestoreStatus.choices, default=RestoreStatus.RUNNING)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    restored_head = models.PositiveBigIntegerField(null=True, blank=True)
    position_floor = models.PositiveBigIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["slug", "status"], name="ix_orgrestore_slug_status")]

    def __str__(self) -> str:
        return f"restore of {self.slug} ({self.status})"
