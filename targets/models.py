"""Targets, claim keys and routed runs: each org's own store (routed by tenancy.db_router).

A `Target` is a registered machine. Its `ClaimKey` (one per target) holds only the SHA-256 of
the key its daemon presents. A `RoutedRun` is one durable offer in the (org, target) mailbox:
the run path offers it, exactly one claim wins it, the machine's report settles it.
"""

from django.db import models
from django.db.models import Q

from agents_site.vocabulary import RoutedRunState, TargetKind, TargetStatus


class Target(models.Model):
    """A registered machine (spec 003: /v1/agents/targets; reference §1.7).

    `owner` is the registrant's subject (username or JWT `sub`); "" = unowned (admin-only until
    its owner re-registers the host). `status` is the stored operator intent; views answer the
    effective status (`targets.selectors.effective_status`). `spec`/`metrics` are sanitized
    dicts ({} = none); `metrics_at` is the server-stamped time of the last heartbeat.
    """

    id = models.CharField(primary_key=True, max_length=64)
    owner = models.CharField(max_length=300, default="", blank=True, db_index=True)
    label = models.CharField(max_length=128)
    kind = models.CharField(max_length=16, choices=TargetKind.choices, default=TargetKind.MACHINE)
    status = models.CharField(max_length=16, choices=TargetStatus.choices, default=TargetStatus.ONLINE)
    capacity = models.CharField(max_length=256, default="", blank=True)
    host = models.CharField(max_length=256, default="", blank=True)
    spec = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    metrics_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["created_at"], name="ix_targets_created")]
        constraints = [
            # Re-linking is keyed on (org, host, owner): one row per owner and host.
            models.UniqueConstraint(fields=["owner", "host"], condition=~Q(host=""), name="uniq_target_owner_host"),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.id})"


class ClaimKey(models.Model):
    """The claim key of one target: only its SHA-256 hex is stored (reference §1.8).

    `serving_at` is stamped by every claim poll (the dispatch gate's proof that a daemon is
    listening) and reset when the key is minted or rotated.
    """

    target = models.OneToOneField(Target, primary_key=True, on_delete=models.CASCADE, related_name="claim_key")
    key_hash = models.CharField(max_length=64)
    serving_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"claim key of {self.target_id} (sha256 {self.key_hash[:12]}…)"


class RoutedRun(models.Model):
    """One offer in the (org, target) mailbox, durable in the org's store.

    The run path offers it (`state=offered`); a claim wins it by an atomic
    `UPDATE … WHERE claimed_at IS NULL` (`claimed`); the machine's report settles it
    (`reported`, `result` kept); a stopped run or a deleted target withdraws it (`withdrawn`).
    `payload` is what the machine receives (never a credential).
    """

    run_id = models.CharField(primary_key=True, max_length=64)
    target_id = models.CharField(max_length=64)
    session_id = models.CharField(max_length=64, default="", blank=True)
    payload = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=RoutedRunState.choices, default=RoutedRunState.OFFERED)
    offered_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    reported_at = models.DateTimeField(null=True, blank=True)
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["offered_at", "run_id"]
        indexes = [models.Index(fields=["target_id", "state", "offered_at"], name="ix_routed_target_state")]

    def __str__(self) -> str:
        return f"{self.run_id} → {self.target_id} ({self.state})"
