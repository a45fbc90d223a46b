"""The A2A routes (plain Django views; `access` says who may call each, `urls` mounts them).

* `GET  /v1/agents/{ref}/a2a/.well-known/agent-card.json` — the agent's card (`cards.agent_card`);
  an identity agent's is the capability manifest it signed and registered (docs/manifests.md);
* `POST /v1/agents/{ref}/a2a` — A2A JSON-RPC (v1.0 methods, and v0.3's through the SDK's
  adapter): `a2a-sdk`'s dispatcher with this face's `RunTaskHandler`; answers are JSON-RPC
  objects (HTTP 200), or `text/event-stream` for `SendStreamingMessage`;
* `GET | PUT | DELETE /v1/agents/{ref}/a2a/public` — whether the agent is in the org's public
  directory (`{"public": bool, "url": …}`); PUT and DELETE by an org admin;
* `GET /v1/agents/a2a/public/{org}` — the org's public directory `{"org", "agents": [card…]}`;
* `GET /v1/agents/a2a/public/{org}/{name}/.well-known/agent-card.json` — one public card.

What is refused before the protocol starts (no credential 403, an unknown agent 404, a wrong
method 405, a body that is not JSON 415) is the one error shape `{"status", "code", "error"}`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from functools import wraps

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request as StarletteRequest

from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher

from agents_site.errors import ApiError, error_response
from agents_site.vocabulary import AgentHosting, ErrorCode
from a2a_server import access, cards, selectors, services
from a2a_server.handler import RunTaskHandler
from identity.selectors import manifest_get
from tenancy import stores
from tenancy.faults import store_fault

logger = logging.getLogger(__name__)

REQUEST_ID_MAX = 128


class MethodNotAllowed(ApiError):
    """405: the route exists without this method; `Allow` names the ones it serves."""

    status = 405
    code = ErrorCode.METHOD_NOT_ALLOWED

    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        super().__init__(f"{method} is not allowed here; use {', '.join(allowed)}")
        self.allowed = allowed

    def headers(self) -> dict[str, str]:
        """Return `{"Allow": …}`."""
        return {"Allow": ", ".join(self.allowed)}


def _refusal(exc: Exception):
    if isinstance(exc, ApiError):
        return error_response(exc)
    fault = store_fault(exc)
    if fault is not None:
        return error_response(fault)
    raise exc


def routed(*methods: str):
    """Decorate a sync view: CSRF-exempt (bearer or a read), `methods` only (405), typed errors in the one shape."""

    def decorate(view):
        @csrf_exempt
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            try:
                if request.method not in methods:
                    raise MethodNotAllowed(request.method, methods)
                return view(request, *args, **kwargs)
            except Exception as exc:
                return _refusal(exc)

        return wrapper

    return decorate


def base_url(request) -> str:
    """Return the scheme and host the caller reached (`https://agents.example`)."""
    return request.build_absolute_uri("/").rstrip("/")


def _card_response(card) -> JsonResponse:
    response = JsonResponse(cards.card_body(card), json_dumps_params={"ensure_ascii": False})
    response["Cache-Control"] = "no-cache"
    return response


@routed("GET")
def card(request, ref: str):
    """The agent's A2A card for the org's members (404 unknown, another org's, or not the key's)."""
    principal = access.member(request)
    agent = access.agent_for(principal, ref)
    if agent.hosting == AgentHosting.EXTERNAL:  # an identity agent's card is the manifest it signed (404 until it registers one)
        response = JsonResponse(manifest_get(agent_id=agent.id).card, json_dumps_params={"ensure_ascii": False})
        response["Cache-Control"] = "no-cache"
        return response
    return _card_response(cards.agent_card(agent, base_url=base_url(request), org_slug=principal.org_slug))


@routed("GET", "PUT", "DELETE")
def listing(request, ref: str):
    """Whether the agent is in the org's public directory: GET for members, PUT (list) / DELETE (unlist) for admins."""
    principal = access.member(request) if request.method == "GET" else access.admin(request)
    agent = access.agent_for(principal, ref)
    if request.method == "PUT":
        created = services.card_list(agent=agent, actor=principal.actor)
        status = 201 if created else 200
    elif request.method == "DELETE":
        services.card_unlist(agent=agent)
        return HttpResponse(status=204)
    else:
        status = 200
    public = selectors.is_listed(agent=agent)
    url = base_url(request) + cards.public_card_path(principal.org_slug, agent) if public else None
    return JsonResponse({"agent": agent.name, "public": public, "url": url}, status=status)


@routed("GET")
def directory(request, org: str):
    """The org's public directory: every card it listed, for anyone (404 for an org with none or no such org)."""
    agents = selectors.public_agents(org_slug=org)
    root = base_url(request)
    body = {"org": org, "agents": [cards.card_body(cards.agent_card(a, base_url=root, org_slug=org, public=True)) for a in agents]}
    return JsonResponse(body, json_dumps_params={"ensure_ascii": False})


@routed("GET")
def public_card(request, org: str, name: str):
    """One public card, for anyone (404 unless the org listed that agent)."""
    agent = selectors.public_agent(org_slug=org, name=name)
    return _card_response(cards.agent_card(agent, base_url=base_url(request), org_slug=org, public=True))


# -- the JSON-RPC endpoint ---------------------------------------------------------------------------

def _request_id(request) -> str:
    given = (request.headers.get("X-Request-Id") or "").strip()
    return given[:REQUEST_ID_MAX] if given else "req_" + secrets.token_hex(12)


def _resolve(request, ref: str):
    """Return `(principal, agent)` for a JSON-RPC call (in a worker thread: the agent is read from the store)."""
    try:
        principal = access.bearer(request)
        with stores.org_context(principal.org_slug):
            return principal, access.agent_for(principal, ref)
    finally:
        close_old_connections()


def _starlette_request(request) -> StarletteRequest:
    """Return the Django request as the Starlette request the SDK's dispatcher reads (headers and body)."""
    body = request.body

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    scope = {"type": "http", "method": request.method, "path": request.path, "root_path": "", "scheme": request.scheme,
             "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
             "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]}
    return StarletteRequest(scope, receive)


def _ping_seconds() -> float:
    return max(float(getattr(settings, "AGENTS_SSE_PING_SECONDS", 25)), 0.05)


async def _events(source):
    """Render the dispatcher's SSE items (`{"data", "event"?}`) as frames; `: ping` while idle."""
    iterator = source.__aiter__()
    pending = None
    try:
        while True:
            pending = pending or asyncio.ensure_future(iterator.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=_ping_seconds())
            if not done:
                yield ": ping\n\n"
                continue
            try:
                item = pending.result()
            except StopAsyncIteration:
                pending = None
                return
            pending = None
            head = f"event: {item['event']}\n" if item.get("event") else ""
            yield head + "".join(f"data: {line}\n" for line in str(item.get("data", "")).splitlines() or [""]) + "\n"
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
        close = getattr(iterator, "aclose", None)
        if close is not None:
            try:
                await close()
            except Exception:  # the caller left mid-stream; the task goes on
                logger.debug("closing an A2A stream failed", exc_info=True)


def _django_response(response):
    if isinstance(response, EventSourceResponse):
        streamed = StreamingHttpResponse(_events(response.body_iterator), content_type="text/event-stream")
        streamed["Cache-Control"] = "no-cache"
        streamed["X-Accel-Buffering"] = "no"
        return streamed
    return HttpResponse(response.body, status=response.status_code, content_type="application/json")


@csrf_exempt
async def endpoint(request, ref: str):
    """`POST /v1/agents/{ref}/a2a`: one A2A JSON-RPC call on agent `ref` (see the module text)."""
    try:
        if request.method != "POST":
            raise MethodNotAllowed(request.method, ("POST",))
        principal, agent = await sync_to_async(_resolve, thread_sensitive=False)(request, ref)
    except Exception as exc:
        return _refusal(exc)
    handler = RunTaskHandler(principal=principal, agent=agent, org=principal.org_slug, request_id=_request_id(request))
    dispatcher = JsonRpcDispatcher(handler, enable_v0_3_compat=True)
    return _django_response(await dispatcher.handle_requests(_starlette_request(request)))
