"""Wire shapes of the webhook endpoint routes (`/v1/agents/webhooks`)."""

from __future__ import annotations

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool

from agents_site.schemas import BodySchema, choice, declare, required_in_docs, text
from agents_site.vocabulary import DeliveryStatus, WebhookDisabledReason, WebhookEventType
from webhooks.destinations import MAX_URL_CHARS
from webhooks.services import MAX_DESCRIPTION_CHARS

_SUBSCRIBABLE = sorted(str(e) for e in WebhookEventType.SUBSCRIBABLE)
_EVENTS = ("The events delivered to this endpoint: `run.finished` (every kind of run), `run.waiting`, `coding.pushed`, "
           "`session.published`, `target.offline` (a machine's computed status changed), `balance.low`.")


class WebhookIn(BodySchema):
    """Change an endpoint: an omitted (or null) field keeps its value."""

    url: str | None = text(description="Where events are POSTed: https (a public address), at most 2048 characters.",
                           maxLength=MAX_URL_CHARS, format="uri")
    events: list[str] | None = Field(None, description=_EVENTS, json_schema_extra=declare(
        on="array", minItems=1, items={"type": "string", "enum": _SUBSCRIBABLE}))
    description: str | None = text(description=f"At most {MAX_DESCRIPTION_CHARS} characters.", maxLength=MAX_DESCRIPTION_CHARS)
    enabled: StrictBool | None = Field(None, description="`false` stops deliveries; `true` again also clears a disable for failing.")


class WebhookCreateIn(WebhookIn):
    """Create an endpoint: `url` and `events` are required; it starts enabled."""

    model_config = ConfigDict(json_schema_extra=required_in_docs("url", "events"))


class WebhookOut(Schema):
    """An org webhook endpoint (its secret is answered only at creation and rotation)."""

    id: str = Field(..., description="`whe_` and 32 hex digits.")
    url: str
    events: list[str] = Field(..., json_schema_extra={"items": {"type": "string", "enum": _SUBSCRIBABLE}})
    description: str
    enabled: bool
    disabledReason: str | None = choice([w for w in WebhookDisabledReason.values if w], description=(
        "`failing`: every attempt failed for 24 hours, so the endpoint was disabled; `gone`: its receiver answered "
        "410 Gone, so it was disabled at once; absent otherwise."))
    failingSince: str | None = Field(None, description="When the current streak of failed attempts began (RFC 3339).")
    createdAt: str
    updatedAt: str


class WebhookSecretOut(WebhookOut):
    """An endpoint with its signing secret, shown this once: keep it to verify deliveries."""

    secret: str = Field(..., description="`whsec_…`: verify each delivery's `webhook-signature` with it (Standard Webhooks).")


class WebhookListOut(Schema):
    webhooks: list[WebhookOut]


class AttemptOut(Schema):
    """One HTTP attempt of a delivery."""

    number: int
    statusCode: int | None = Field(None, description="The receiver's status code; absent when it did not answer.")
    error: str | None = Field(None, description="Why the attempt failed; absent when it succeeded.")
    responseBody: str | None = Field(None, description="At most 4 KiB of the receiver's answer, credentials masked.")
    durationMs: int
    createdAt: str


class DeliveryOut(Schema):
    """One event delivered to one URL; `id` is the `webhook-id` header, the same on every attempt."""

    id: str
    endpointId: str
    eventId: str
    type: str = choice(WebhookEventType, ...)
    url: str
    status: str = choice(DeliveryStatus, ...)
    attempts: int
    lastStatusCode: int | None = None
    lastError: str | None = None
    nextAttemptAt: str | None = None
    createdAt: str
    deliveredAt: str | None = None
    attemptLog: list[AttemptOut]


class DeliveryListOut(Schema):
    deliveries: list[DeliveryOut]
