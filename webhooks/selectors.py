"""Reads of org webhook endpoints and their deliveries. Org context required."""

from __future__ import annotations

from agents_site.errors import NotFound
from agents_site.vocabulary import WebhookDisabledReason, WebhookEventType
from tenancy import stores
from webhooks import queries
from webhooks.models import Endpoint, EventDelivery

DELIVERIES_LIMIT = 50


def endpoint_list() -> list[Endpoint]:
    """Return the org's endpoints, newest first (an org has at most `services.MAX_ENDPOINTS`)."""
    return list(Endpoint.objects.order_by("-id"))


def endpoint_get(*, endpoint_id: str) -> Endpoint:
    """Return endpoint `endpoint_id`; 404 (`NotFound`) when the org has none of that id."""
    row = Endpoint.objects.filter(public_id=endpoint_id).first() if isinstance(endpoint_id, str) else None
    if row is None:
        raise NotFound("no webhook endpoint of that id")
    return row


def endpoints_for(event_type: str) -> list[Endpoint]:
    """Return the enabled endpoints subscribed to `event_type`."""
    return [e for e in Endpoint.objects.filter(enabled=True) if str(event_type) in (e.events or [])]


def run_finished_reach(*, run_id: str) -> tuple[list[tuple[Endpoint, str]], bool]:
    """Return `(targets, balance_low_heard)` for run `run_id`'s finish, from ONE query.

    `targets`: where its `run.finished` goes, as `(endpoint, url)` pairs — first every enabled
    endpoint subscribed to `run.finished` (its own URL), then the run's own callback
    (`RunCallback`: the URL its request named, signed with its endpoint's secret) when that
    endpoint is enabled. `balance_low_heard`: whether any enabled endpoint subscribes to
    `balance.low`, so the debit's check reads the endpoints again only to deliver one (issue 32:
    one read, not two; issue 26 item 4: a run's fixed cost).
    """
    endpoints = queries.enabled_endpoints_with_callback(run_id, stores.current_alias())
    subscribed = [(e, e.url) for e in endpoints if str(WebhookEventType.RUN_FINISHED) in (e.events or [])]
    heard = any(str(WebhookEventType.BALANCE_LOW) in (e.events or []) for e in endpoints)
    return subscribed + [(e, e.callback_url) for e in endpoints if e.callback_url], heard


def failing_endpoints() -> list[Endpoint]:
    """Return the endpoints disabled by their failures (24 h failing, or a 410 Gone; the dashboard's alert)."""
    reasons = [WebhookDisabledReason.FAILING, WebhookDisabledReason.GONE]
    return list(Endpoint.objects.filter(enabled=False, disabled_reason__in=reasons).order_by("-updated_at"))


def deliveries_of(*, endpoint: Endpoint, limit: int = DELIVERIES_LIMIT) -> list[EventDelivery]:
    """Return the endpoint's newest `limit` deliveries with their attempt logs."""
    return list(EventDelivery.objects.filter(endpoint=endpoint).prefetch_related("attempt_log").order_by("-id")[:limit])


def delivery_get(*, delivery_id: str) -> EventDelivery:
    """Return delivery `delivery_id` (`msg_…`) of an org endpoint; 404 when unknown."""
    row = EventDelivery.objects.select_related("endpoint").filter(public_id=delivery_id).first() if isinstance(delivery_id, str) else None
    if row is None:
        raise NotFound("no webhook delivery of that id")
    return row
