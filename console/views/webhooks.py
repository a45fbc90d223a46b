"""Org-admin pages of webhook endpoints (issue 32 item 4): create, rotate, test send, enable or
disable, delete; each endpoint's deliveries with status, attempts and response code; redeliver.

The pages call the same services as `/v1/agents/webhooks` (one set of rules). A new or rotated
secret is rendered only in the answer to that POST (`Cache-Control: no-store`).
"""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agents_site.errors import ApiError
from agents_site.vocabulary import DeliveryStatus, WebhookEventType
from console.access import org_admin_required
from webhooks import selectors, services
from webhooks.presenters import delivery_view, endpoint_view

EVENT_CHOICES = sorted(str(e) for e in WebhookEventType.SUBSCRIBABLE)


def _page(request, *, secret_for: tuple[str, str] | None = None, error: str = "", form: dict | None = None, status: int = 200,
          field_errors: dict[str, str] | None = None):
    endpoints = [endpoint_view(e) for e in selectors.endpoint_list()]
    response = render(request, "console/webhooks/list.html", {
        "endpoints": endpoints, "event_choices": EVENT_CHOICES, "secret_for": secret_for, "error": error,
        "field_errors": field_errors or {},
        "form": form or {"events": ["run.finished"]}, "nav": "webhooks",
    }, status=status)
    if secret_for:
        response["Cache-Control"] = "no-store"
    return response


@org_admin_required
@require_http_methods(["GET", "POST"])
def webhook_list(request):
    """List the org's endpoints; on POST create one and show its secret once (400 form error otherwise)."""
    if request.method == "GET":
        return _page(request)
    form = {"url": request.POST.get("url", ""), "events": request.POST.getlist("events"), "description": request.POST.get("description", "")}
    data = services.EndpointInput(url=form["url"], events=form["events"], description=form["description"])
    field_errors = services.endpoint_input_errors(data=data)  # every refused field at once, in the create's words
    if field_errors:
        return _page(request, form=form, field_errors=field_errors, status=400)
    try:
        endpoint, secret = services.endpoint_create(data=data, actor=request.principal.actor)
    except ApiError as exc:
        return _page(request, error=exc.message, form=form, status=400)
    return _page(request, secret_for=(endpoint.public_id, secret))


@org_admin_required
@require_POST
def webhook_action(request, endpoint_id: str, action: str):
    """Rotate (shows the new secret once), test, enable, disable or delete one endpoint (404 for another org's)."""
    if action == "rotate":
        endpoint, secret = services.endpoint_rotate(endpoint_id=endpoint_id)
        return _page(request, secret_for=(endpoint.public_id, secret))
    if action == "test":
        delivery = services.endpoint_test(endpoint_id=endpoint_id)
        code = f" ({delivery.last_status_code})" if delivery.last_status_code else ""
        if delivery.status == DeliveryStatus.SUCCEEDED:
            messages.success(request, f"Test event delivered{code}.")
        else:
            messages.error(request, f"Test event not delivered{code}: {delivery.last_error}. It will be retried.")
        return redirect("console:webhook", endpoint_id=endpoint_id)
    if action in ("enable", "disable"):
        services.endpoint_update(endpoint_id=endpoint_id, data=services.EndpointInput(enabled=action == "enable"))
        messages.success(request, f"Endpoint {action}d.")
        return redirect("console:webhooks")
    if action == "delete":
        services.endpoint_delete(endpoint_id=endpoint_id)
        messages.success(request, "Endpoint deleted with its delivery log.")
        return redirect("console:webhooks")
    selectors.endpoint_get(endpoint_id="")  # an unknown action: 404


@org_admin_required
def webhook_detail(request, endpoint_id: str):
    """Show one endpoint and its newest deliveries: status, attempts, response code, each attempt."""
    endpoint = selectors.endpoint_get(endpoint_id=endpoint_id)
    deliveries = [delivery_view(d) for d in selectors.deliveries_of(endpoint=endpoint)]
    return render(request, "console/webhooks/detail.html", {
        "endpoint": endpoint_view(endpoint), "deliveries": deliveries, "open_statuses": [str(s) for s in DeliveryStatus.OPEN],
        "nav": "webhooks",
    })


@org_admin_required
@require_POST
def webhook_redeliver(request, endpoint_id: str, delivery_id: str):
    """Queue a finished delivery again under the same webhook-id (an open one: an error message)."""
    endpoint = selectors.endpoint_get(endpoint_id=endpoint_id)
    delivery = selectors.delivery_get(delivery_id=delivery_id)
    if delivery.endpoint_id != endpoint.pk:
        selectors.delivery_get(delivery_id="")
    try:
        services.delivery_redeliver(delivery_id=delivery_id)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Delivery {delivery_id} queued again.")
    return redirect("console:webhook", endpoint_id=endpoint_id)
