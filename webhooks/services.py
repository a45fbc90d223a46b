"""Writes of org webhook endpoints (issue 32 item 1): create, change, rotate, delete, test, redeliver.

Org context required; the API allows org admins only (`webhooks.api`). The secret is
`whsec_<base64 of 32 random bytes>`, kept encrypted (`webhooks.secretbox`) because the platform
signs with it, and answered only by `endpoint_create` and `endpoint_rotate`. The URL is checked
like every webhook destination (`webhooks.destinations.clean_url`: https to a public address
unless `AGENTS_WEBHOOK_ALLOW_HOSTS` admits the host).
"""

from __future__ import annotations

import base64
import functools
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from agents_site.errors import Conflict, InvalidRequest
from agents_site.ids import mint_id
from agents_site.vocabulary import DeliveryStatus, WebhookChannel, WebhookDisabledReason, WebhookEventType
from tenancy import stores
from webhooks import engine, queries, selectors
from webhooks.destinations import clean_url
from webhooks.models import Endpoint, EventAttempt, EventDelivery
from webhooks.secretbox import decrypt_secret, encrypt_secret

SECRET_PREFIX = "whsec_"
MAX_DESCRIPTION_CHARS = 500
MAX_ENDPOINTS = 20  # per org


def new_secret() -> str:
    """Return a fresh Standard Webhooks secret `whsec_<base64 of 32 random bytes>`."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def clean_events(value: object) -> list[str]:
    """Return `value` as a sorted list of distinct subscribable event words; else 400."""
    if not isinstance(value, list) or not value:
        raise InvalidRequest("events must be a non-empty list of event types")
    allowed = {str(e) for e in WebhookEventType.SUBSCRIBABLE}
    unknown = [e for e in value if not isinstance(e, str) or e not in allowed]
    if unknown:
        raise InvalidRequest(f"events: unknown event type {unknown[0]!r} (one of {', '.join(sorted(allowed))})")
    return sorted(set(value))


def _clean_description(value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION_CHARS:
        raise InvalidRequest(f"description must be text of at most {MAX_DESCRIPTION_CHARS} characters")
    return value.strip()


def _clean_endpoint_url(value: object) -> str:
    url = clean_url(value, "url")
    if not url:
        raise InvalidRequest("url is required")
    return url


@dataclass
class EndpointInput:
    """The writable fields of an endpoint; None = not given (kept on a change)."""

    url: str | None = None
    events: list | None = None
    description: str | None = None
    enabled: bool | None = None


def endpoint_input_errors(*, data: EndpointInput) -> dict[str, str]:
    """Return every field of a new endpoint `endpoint_create` refuses, `{field: message}` ({} when
    all pass), each judged on its own in the create's words, so a form shows them all at once.

    The org's endpoint cap (409) is left to `endpoint_create`. Reads nothing.
    Example: `endpoint_input_errors(data=EndpointInput(url="", events=[]))` →
    `{"url": "url is required", "events": "events must be a non-empty list of event types"}`.
    """
    errors: dict[str, str] = {}
    for field, check in (("url", lambda: _clean_endpoint_url(data.url)), ("events", lambda: clean_events(data.events)),
                         ("description", lambda: _clean_description(data.description))):
        try:
            check()
        except InvalidRequest as exc:
            errors[field] = exc.message
    return errors


def endpoint_create(*, data: EndpointInput, actor: str) -> tuple[Endpoint, str]:
    """Create an endpoint → `(endpoint, secret)`; the secret is never answered again.

    400 for a refused URL, an empty or unknown `events`, a long description; 409 when the org
    already has `MAX_ENDPOINTS` endpoints.
    """
    url = _clean_endpoint_url(data.url)
    events = clean_events(data.events)
    description = _clean_description(data.description)
    secret = new_secret()
    at = engine.now()
    with stores.org_atomic():
        if Endpoint.objects.count() >= MAX_ENDPOINTS:
            raise Conflict(f"an org has at most {MAX_ENDPOINTS} webhook endpoints; delete one first")
        row = Endpoint.objects.create(
            public_id=mint_id("whe"), url=url, events=events, description=description,
            enabled=True if data.enabled is None else bool(data.enabled), secret_encrypted=encrypt_secret(secret),
            created_by=actor, created_at=at, updated_at=at,
        )
    return row, secret


def endpoint_update(*, endpoint_id: str, data: EndpointInput) -> Endpoint:
    """Change an endpoint's url, events, description or enabled (404 for an unknown one; 400 as create).

    Enabling it again clears a `failing` disable and its failing streak.
    """
    fields = {}
    if data.url is not None:
        fields["url"] = _clean_endpoint_url(data.url)
    if data.events is not None:
        fields["events"] = clean_events(data.events)
    if data.description is not None:
        fields["description"] = _clean_description(data.description)
    if data.enabled is not None:
        fields["enabled"] = bool(data.enabled)
        fields["disabled_reason"] = WebhookDisabledReason.NONE
        fields["failing_since"] = None
    with stores.org_atomic():
        row = selectors.endpoint_get(endpoint_id=endpoint_id)
        for name, value in fields.items():
            setattr(row, name, value)
        row.updated_at = engine.now()
        row.save()
    return row


def endpoint_rotate(*, endpoint_id: str) -> tuple[Endpoint, str]:
    """Give an endpoint a new secret → `(endpoint, secret)`; the old one signs nothing after (404 unknown)."""
    secret = new_secret()
    with stores.org_atomic():
        row = selectors.endpoint_get(endpoint_id=endpoint_id)
        row.secret_encrypted = encrypt_secret(secret)
        row.updated_at = engine.now()
        row.save(update_fields=["secret_encrypted", "updated_at"])
    return row, secret


def endpoint_delete(*, endpoint_id: str) -> None:
    """Delete an endpoint with its deliveries, their attempts and its callbacks (404 unknown).

    The endpoint's row is locked (`FOR UPDATE` on PostgreSQL) before its rows are collected:
    a run finishing meanwhile, an attempt being recorded or a run being started with a
    callback under it holds the row too (`queries.endpoints_held`), so either it waits for this
    delete and skips the endpoint, or this waits for it and deletes what it wrote as well —
    neither side fails on the foreign key (issue 51; decision 1510).
    """
    with stores.org_atomic():
        row = Endpoint.objects.select_for_update().filter(public_id=endpoint_id).first() if isinstance(endpoint_id, str) else None
        if row is None:
            selectors.endpoint_get(endpoint_id="")  # 404 like any unknown id
        row.delete()


def endpoint_secret(endpoint: Endpoint) -> str | None:
    """Return the endpoint's `whsec_…` secret (None when no deployment key opens it)."""
    return decrypt_secret(endpoint.secret_encrypted)


def deliveries_create(*, endpoints_and_urls: list[tuple[Endpoint, str]], event_type: str, data: dict, event_id: str | None = None,
                      enqueue: bool = True) -> list[EventDelivery]:
    """Create one pending delivery of event `event_type` (`data`) per `(endpoint, url)`; queue them after commit.

    The payload is fixed now (the same bytes on every attempt). Returns the deliveries. An
    endpoint deleted since it was read gets none (decision 1510): the endpoints are held against
    a delete (`queries.endpoints_held`) before the rows go in, so a delivery never refers to an
    endpoint whose delete has committed or will commit before it.
    """
    if not endpoints_and_urls:
        return []
    at = engine.now()
    event_id = event_id or mint_id("evt")
    body = engine.event_body(event_type, data, at=at)
    with stores.org_atomic():
        alive = queries.endpoints_held([endpoint.pk for endpoint, _ in endpoints_and_urls], stores.current_alias())
        rows = [
            EventDelivery(public_id=engine.new_message_id(), endpoint=endpoint, event_id=event_id, event_type=str(event_type), url=url,
                          payload=body, status=DeliveryStatus.PENDING, next_attempt_at=at, created_at=at, updated_at=at)
            for endpoint, url in endpoints_and_urls if endpoint.pk in alive
        ]
        if not rows:
            return []
        EventDelivery.objects.bulk_create(rows)
        if enqueue:
            engine.on_commit_enqueue(WebhookChannel.ORG, [r.public_id for r in rows])
    return rows


def endpoint_test(*, endpoint_id: str) -> EventDelivery:
    """Send a `webhook.test` event to an endpoint now (one attempt, in this request); return the delivery.

    404 for an unknown endpoint. A failed test is retried like any delivery.
    """
    endpoint = selectors.endpoint_get(endpoint_id=endpoint_id)
    data = {"endpointId": endpoint.public_id, "message": "a test event from the Agents console"}
    rows = deliveries_create(endpoints_and_urls=[(endpoint, endpoint.url)], event_type=WebhookEventType.TEST, data=data, enqueue=False)
    if not rows:
        selectors.endpoint_get(endpoint_id="")  # deleted meanwhile: 404 like an unknown one
    row = rows[0]
    engine.attempt(WebhookChannel.ORG, row.public_id, force=True)
    return selectors.delivery_get(delivery_id=row.public_id)


def delivery_redeliver(*, delivery_id: str) -> EventDelivery:
    """Deliver a finished delivery again under its own `webhook-id` (404 unknown, 409 while open)."""
    row = selectors.delivery_get(delivery_id=delivery_id)
    engine.reopen(WebhookChannel.ORG, row)
    return selectors.delivery_get(delivery_id=delivery_id)


GONE_ERROR = "not attempted: the endpoint was disabled when its receiver answered 410 Gone"


def _after_attempt(delivery: EventDelivery, ok: bool, at) -> None:
    """Keep the endpoint's failing streak; disable it once it has failed for the disable window.

    A 410 Gone disables it at once (`disabled_reason` `gone`) and ends its other open deliveries
    `dead` (the receiver said the URL is gone; enabling the endpoint again starts over).
    """
    endpoint_pk = delivery.endpoint_id
    if ok:
        Endpoint.objects.filter(pk=endpoint_pk, failing_since__isnull=False).update(failing_since=None)
        return
    if delivery.last_status_code == engine.GONE_STATUS:
        Endpoint.objects.filter(pk=endpoint_pk).update(enabled=False, disabled_reason=WebhookDisabledReason.GONE, updated_at=at)
        EventDelivery.objects.filter(endpoint_id=endpoint_pk, status__in=DeliveryStatus.OPEN).exclude(pk=delivery.pk).update(
            status=DeliveryStatus.DEAD, next_attempt_at=None, last_error=GONE_ERROR, updated_at=at)
        return
    Endpoint.objects.filter(pk=endpoint_pk, failing_since__isnull=True).update(failing_since=at)
    window = timedelta(seconds=float(getattr(settings, "AGENTS_WEBHOOK_DISABLE_AFTER_SECONDS", 86400)))
    Endpoint.objects.filter(pk=endpoint_pk, enabled=True, failing_since__lte=at - window).update(
        enabled=False, disabled_reason=WebhookDisabledReason.FAILING, updated_at=at
    )


def _hold(delivery: EventDelivery) -> bool:
    """Hold the delivery's endpoint against a delete while its attempt is recorded; False when
    the endpoint (and so the delivery) was deleted meanwhile: the attempt is not recorded."""
    return bool(queries.endpoints_held([delivery.endpoint_id], stores.current_alias()))


def _secret(delivery: EventDelivery) -> str | None:
    """Return the signing secret of `delivery`'s endpoint (None: the endpoint is gone, or no deployment key opens it)."""
    token = next(iter(Endpoint.objects.filter(pk=delivery.endpoint_id).values_list("secret_encrypted", flat=True)[:1]), None)
    if token is None:
        return None
    return _opened(token, str(getattr(settings, "AGENTS_SECRETS_KEY", "") or ""), settings.SECRET_KEY)


@functools.lru_cache(maxsize=256)
def _opened(token: str, keys: str, secret_key: str) -> str | None:
    """`decrypt_secret(token)`, remembered per token and deployment keys (the keys are part of the
    cache key, so a changed key is never answered from the cache): each attempt decrypted it anew."""
    return decrypt_secret(token)


def channel() -> engine.Channel:
    """Return the engine channel of org endpoint deliveries."""
    return engine.Channel(name=str(WebhookChannel.ORG), delivery_model=EventDelivery, attempt_model=EventAttempt,
                          secret=_secret, after_attempt=_after_attempt, hold=_hold)
