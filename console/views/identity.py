"""Identity pages (spec 001): your identity agents, their delivery log, your inbox.

Reads use `identity.selectors` as the API does; every write (create, edit, rotate, delete,
replay) is made by the page's JS against `/v1/identity/` with the session login, so the
console answers exactly what the API answers and shows tokens only where the API does (once).
"""

from __future__ import annotations

import json

from django.http import JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agents_site.errors import ApiError, InvalidRequest
from agents_site.vocabulary import ConnectionMode, DeliveryStatus, IdentityCategory
from console.access import member_required, org_admin_required
from identity import selectors, services
from identity.presenters import anomaly_view, delivery_view, envelope_view, identity_view, inbox_item_view, keyset_view, public_keys_view
from identity.serializers import CONVERSATION_ID


@member_required
def identity_agents(request):
    """List the identity agents the signed-in user created, with create/edit/rotate/delete."""
    creator = request.principal.subject
    profiles = selectors.identity_list(creator_id=creator)
    keys = selectors.valid_keysets(agent_ids=[p.agent_id for p in profiles])
    agents = [identity_view(p, keysets=keys.get(p.agent_id)) for p in profiles]
    return render(
        request,
        "console/identity/list.html",
        {"agents": agents, "identity_categories": IdentityCategory.values, "connection_modes": ConnectionMode.values,
         "webhook_mode": ConnectionMode.WEBHOOK, "nav": "identity"},
    )


@member_required
@require_POST
def identity_keys_register(request, ref: str):
    """Register new public keys for the signed-in user's identity agent `ref` (creator only).

    The identity page's "Re-register keys" (after a token rotation, or to replace lost keys):
    the browser makes the key pairs and sends only the public halves, JSON
    `{"public_key", "signing_public_key", "webhook_secret"?}` (a webhook agent needs its new
    secret), to the same service as `POST /v1/identity/agents/{id}/keys/register`
    (`identity.services.keys_register`): the previous current set is superseded at once.
    A creator may do this without the agent token because a creator may rotate that token
    anyway. Answers 200 with the key set as the API does, or the API's error body
    `{"status", "code", "error"}` with its status (404 for another user's or a missing agent).
    """
    try:
        profile = selectors.identity_get_owned(ref=ref, creator_id=request.principal.subject)
        try:
            body = json.loads(request.body or b"{}")
        except ValueError as exc:
            raise InvalidRequest("the request body must be a JSON object") from exc
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object")
        keyset = services.keys_register(
            agent_id=profile.agent_id,
            public_key=body.get("public_key"),
            signing_public_key=body.get("signing_public_key"),
            webhook_secret=body.get("webhook_secret"),
        )
    except ApiError as exc:
        return JsonResponse(exc.body(), status=exc.status)
    return JsonResponse(keyset_view(keyset))


@member_required
def identity_deliveries(request, ref: str):
    """Show one identity agent's webhook delivery log (creator only; 404 otherwise) with replay."""
    profile = selectors.identity_get_owned(ref=ref, creator_id=request.principal.subject)
    rows, cursor = selectors.delivery_page(agent_id=profile.agent_id, cursor=request.GET.get("cursor"), limit=50)
    return render(
        request,
        "console/identity/deliveries.html",
        {"agent": identity_view(profile), "deliveries": [delivery_view(r) for r in rows], "next_cursor": cursor, "nav": "identity",
         "delivery_terminal": sorted(str(s) for s in DeliveryStatus.TERMINAL)},  # a finished delivery can be replayed
    )


@member_required
def identity_inbox(request):
    """Show the signed-in user's inbox: envelopes from agents and security alerts (live via SSE)."""
    items, cursor = selectors.inbox_page(user_id=request.principal.subject, cursor=request.GET.get("cursor"), limit=50)
    return render(
        request,
        "console/identity/inbox.html",
        {"items": [inbox_item_view(i) for i in items], "next_cursor": cursor, "nav": "inbox"},
    )


@org_admin_required
def identity_anomalies(request):
    """Show org admins what clients refused in artifact forms (spec 001 client_action anomalies), newest first."""
    rows = [anomaly_view(a) for a in selectors.anomaly_list(limit=200)]
    for row in rows:  # a link only for a conversation id of this platform: a stored row never breaks the page
        conversation = row.get("conversation_id") or ""
        row["conversation_url"] = reverse("console:chat-conversation", args=[conversation]) if CONVERSATION_ID.fullmatch(conversation) else ""
    return render(request, "console/identity/anomalies.html", {"anomalies": rows, "nav": "anomalies"})


@member_required
def identity_keys(request):
    """Show the agent-keys page: the browser's keystore (lock/unlock), Passkey or password backup, restore."""
    return render(request, "console/identity/keys.html", {"nav": "keys-local"})


@member_required
def identity_talk_list(request):
    """List the identity agents the signed-in user can talk to: those they added, and their own."""
    user = request.principal.subject
    related = {r.agent_id for r in selectors.user_relations(user_id=user)}
    own = {p.agent_id for p in selectors.identity_list(creator_id=user)}
    profiles = selectors.identity_profiles(agent_ids=sorted(related | own))
    rows = [{**identity_view(p), "related": p.agent_id in related} for p in profiles]
    return render(request, "console/identity/talk_list.html", {"agents": rows, "nav": "talk"})


@member_required
def identity_talk(request, ref: str):
    """The conversation with one identity agent (creator or related user; 404 otherwise).

    The page gets only sealed envelopes and public keys; the browser opens, verifies and seals
    (static/console/talk.js over the SDK's envelope bundle). `inbox_head` makes the live stream
    resume right after what the page was rendered with.
    """
    user = request.principal.subject
    profile = selectors.identity_get_related(ref=ref, user_id=user)
    rows, _ = selectors.conversation_page(agent_id=profile.agent_id, user_id=user, limit=100)
    state = {
        "agent": identity_view(profile),
        "user": user,
        "related": selectors.has_active_relation(agent_id=profile.agent_id, user_id=user),
        "agentKeys": [public_keys_view(k) for k in selectors.agent_key_history(agent_id=profile.agent_id)],
        "myKeys": [public_keys_view(k) for k in selectors.user_key_history(user_id=user)],
        "history": [envelope_view(e) for e in reversed(rows)],
        "alerts": [inbox_item_view(i) for i in selectors.agent_alerts(user_id=user, agent_id=profile.agent_id)],
        "inboxHead": selectors.inbox_head(user_id=user),
        "retentionSeconds": selectors.retention_days() * 86400,
    }
    return render(request, "console/identity/talk.html", {"agent": state["agent"], "talk_state": state, "nav": "talk"})
