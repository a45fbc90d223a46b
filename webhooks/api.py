"""Org webhook endpoint routes (issue 32 item 1: /v1/agents/webhooks). Thin: check, call, shape.

Org admins only (403 otherwise). Statuses every route shares (400, 403, 404 on a path id, 413,
503) are declared for all routes by `server.api`; each route declares the ones of its own.
"""

from __future__ import annotations

from django.http import HttpResponse
from ninja import Router, Status

from agents_site.errors import Forbidden
from agents_site.schemas import ErrorOut
from webhooks import selectors, services
from webhooks.presenters import delivery_view, endpoint_view
from webhooks.schemas import DeliveryListOut, DeliveryOut, WebhookCreateIn, WebhookIn, WebhookListOut, WebhookOut, WebhookSecretOut

router = Router(tags=["webhooks"])


def _admin(request):
    principal = request.auth
    if not getattr(principal, "is_org_admin", False):
        raise Forbidden("only an org admin manages webhook endpoints")
    return principal


def _input(payload: WebhookIn) -> services.EndpointInput:
    given = payload.model_dump(exclude_unset=True)
    return services.EndpointInput(**{k: v for k, v in given.items() if v is not None})


@router.get("", response=WebhookListOut, summary="List the org's webhook endpoints", exclude_none=True)
def list_webhooks(request):
    """Return every webhook endpoint of the caller's org, newest first (never their secrets)."""
    _admin(request)
    return {"webhooks": [endpoint_view(e) for e in selectors.endpoint_list()]}


@router.post("", response={201: WebhookSecretOut, 409: ErrorOut}, summary="Create a webhook endpoint", exclude_none=True)
def create_webhook(request, payload: WebhookCreateIn):
    """Create an endpoint → 201 with its `secret` (`whsec_…`), shown this once.

    Events are POSTed to `url` as Standard Webhooks: `{"type", "timestamp", "data"}` signed in
    `webhook-signature`, `webhook-id` the same on every retry. 400 for a URL the platform does
    not send to (https to a public address only), an empty or unknown `events`; 409 when the org
    already has 20 endpoints.
    """
    principal = _admin(request)
    endpoint, secret = services.endpoint_create(data=_input(payload), actor=principal.actor)
    return Status(201, endpoint_view(endpoint, secret=secret))


@router.get("/{webhook_id}", response=WebhookOut, summary="Read a webhook endpoint", exclude_none=True)
def get_webhook(request, webhook_id: str):
    """Return one endpoint of the caller's org (404 for an unknown id)."""
    _admin(request)
    return endpoint_view(selectors.endpoint_get(endpoint_id=webhook_id))


@router.patch("/{webhook_id}", response=WebhookOut, summary="Change a webhook endpoint", exclude_none=True)
def patch_webhook(request, webhook_id: str, payload: WebhookIn):
    """Change an endpoint's `url`, `events`, `description` or `enabled`; omitted fields keep their values."""
    _admin(request)
    return endpoint_view(services.endpoint_update(endpoint_id=webhook_id, data=_input(payload)))


@router.delete("/{webhook_id}", response={204: None}, summary="Delete a webhook endpoint")
def delete_webhook(request, webhook_id: str):
    """Delete an endpoint with its delivery log → 204."""
    _admin(request)
    services.endpoint_delete(endpoint_id=webhook_id)
    return HttpResponse(status=204)


@router.post("/{webhook_id}/rotate", response=WebhookSecretOut, summary="Rotate a webhook endpoint's secret", exclude_none=True)
def rotate_webhook(request, webhook_id: str):
    """Give the endpoint a new `secret`, shown this once; the old one signs nothing from now on."""
    _admin(request)
    endpoint, secret = services.endpoint_rotate(endpoint_id=webhook_id)
    return endpoint_view(endpoint, secret=secret)


@router.post("/{webhook_id}/test", response=DeliveryOut, summary="Send a test event", exclude_none=True)
def test_webhook(request, webhook_id: str):
    """Send a `webhook.test` event to the endpoint now and answer the delivery after its first attempt."""
    _admin(request)
    return delivery_view(services.endpoint_test(endpoint_id=webhook_id))


@router.get("/{webhook_id}/deliveries", response=DeliveryListOut, summary="An endpoint's delivery log", exclude_none=True)
def list_deliveries(request, webhook_id: str):
    """Return the endpoint's 50 newest deliveries, each with its attempts (status code, ≤ 4 KiB of the answer, masked)."""
    _admin(request)
    endpoint = selectors.endpoint_get(endpoint_id=webhook_id)
    return {"deliveries": [delivery_view(d) for d in selectors.deliveries_of(endpoint=endpoint)]}


@router.post("/{webhook_id}/deliveries/{delivery_id}/redeliver", response={202: DeliveryOut, 409: ErrorOut},
             summary="Deliver an event again", exclude_none=True)
def redeliver(request, webhook_id: str, delivery_id: str):
    """Queue a finished delivery again under the same `webhook-id` → 202; 409 while it is still being attempted."""
    _admin(request)
    endpoint = selectors.endpoint_get(endpoint_id=webhook_id)
    delivery = selectors.delivery_get(delivery_id=delivery_id)
    if delivery.endpoint_id != endpoint.pk:
        selectors.delivery_get(delivery_id="")  # another endpoint's delivery: 404 like an unknown one
    return Status(202, delivery_view(services.delivery_redeliver(delivery_id=delivery_id)))
