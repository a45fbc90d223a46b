"""Webhook models (issue 32), in each org's store.

* `DeliveryFields` / `AttemptFields`: the abstract shape of a delivery and its attempt log, shared
  by every channel of the engine (`webhooks.engine`): identity agents' deliveries
  (`identity.Delivery`) and org endpoints' (`EventDelivery`) have the same columns.
* `Endpoint`: an org webhook endpoint (`/v1/agents/webhooks`): URL, subscribed events, the
  signing secret (encrypted, `webhooks.secretbox`), and its failure state.
* `EventDelivery` / `EventAttempt`: one event to one endpoint, and its attempts.
* `TargetStatusSeen`: the last computed status of each machine the `target.offline` sweep saw.
"""

from __future__ import annotations

from django.db import models

from agents_site.vocabulary import DeliveryStatus, WebhookDisabledReason

MAX_RESPONSE_CHARS = 4096  # of a receiver's answer kept in the attempt log (masked)


class DeliveryFields(models.Model):
    """One event delivered to one URL: status, attempts, backoff, dead letter.

    `public_id` is the Standard Webhooks `webhook-id` (`msg_…`), the same on every attempt and
    redelivery, so receivers drop duplicates. `payload` is the JSON text signed and POSTed (fixed
    when the event happens). `next_attempt_at` is when the next attempt is due while open.
    """

    public_id = models.CharField(max_length=64, unique=True)
    event_type = models.CharField(max_length=32, default="", blank=True)
    url = models.CharField(max_length=2048)
    payload = models.TextField(default="", blank=True)
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, default="", blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(db_index=True)
    updated_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class AttemptFields(models.Model):
    """One HTTP attempt of a delivery: status code or error, ≤ 4 KiB of the answer (masked), duration."""

    number = models.PositiveIntegerField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, default="", blank=True)
    response_body = models.TextField(default="", blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        abstract = True


class Endpoint(models.Model):
    """An org webhook endpoint: where the org's events are POSTed, signed with its own secret.

    `events` is a list of `WebhookEventType.SUBSCRIBABLE` words. `secret_encrypted` is the
    `whsec_…` secret under the deployment key (shown once, at creation and on rotation).
    `failing_since` is the first failed attempt of the current failing streak (cleared by any
    2xx); an endpoint failing for `AGENTS_WEBHOOK_DISABLE_AFTER_SECONDS` is disabled with
    `disabled_reason` `failing` (the console dashboard shows it).
    """

    public_id = models.CharField(max_length=64, unique=True)
    url = models.CharField(max_length=2048)
    events = models.JSONField(default=list)
    description = models.CharField(max_length=500, default="", blank=True)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=16, choices=WebhookDisabledReason.choices, default="", blank=True)
    secret_encrypted = models.TextField()
    failing_since = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=300, default="", blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.public_id} → {self.url}"


class EventDelivery(DeliveryFields):
    """One event to one org endpoint (`event_id` groups the deliveries of one event)."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=64, db_index=True)

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "event deliveries"

    def __str__(self) -> str:
        return f"{self.public_id} {self.event_type} ({self.status})"


class EventAttempt(AttemptFields):
    """One HTTP attempt of an `EventDelivery`."""

    delivery = models.ForeignKey(EventDelivery, on_delete=models.CASCADE, related_name="attempt_log")

    class Meta:
        ordering = ["delivery_id", "number"]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}: {self.status_code or self.error}"


class TargetStatusSeen(models.Model):
    """The computed status of a machine when the `target.offline` sweep last looked (one row per machine)."""

    target_id = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=32)
    changed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.target_id}: {self.status}"


class RunCallback(models.Model):
    """A run's own callback (`webhook` of its request): `run.finished` goes to `url` too, signed
    with `endpoint`'s secret (the URL falls under the endpoint's, `webhooks.callbacks`)."""

    run_id = models.CharField(max_length=64, db_index=True)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="callbacks")
    url = models.CharField(max_length=2048)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.run_id} → {self.url}"
