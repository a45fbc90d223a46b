"""Agent pages: list with run counts, create, edit, delete, detail with run form, history.

Writes go through `agents.services` (the API's own services): the console shows an
`ApiError`'s message word for word and writes nothing, exactly as the API answers 4xx.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from agents import selectors, services
from runs import selectors as run_selectors
from agents.inference import inference_configured, model_catalog, output_token_cap
from agents.tools.registry import tool_choices
from agents_site.errors import ApiError, InvalidRequest, NotFound
from agents_site.vocabulary import AgentHosting
from console.access import member_required, org_admin_required
from console.forms import AgentForm, RunForm
from console.selectors import run_history_page
from identity import selectors as identity_selectors
from identity.manifest_format import REASONS as MANIFEST_REASONS
from identity.presenters import manifest_summary


def _catalog() -> list[str]:
    return sorted(model_catalog() or [])


def _tools(agent_name: str = "") -> dict:
    """Return the picker's context: `tool_choices` (every tool, offered or not) and
    `tools_not_offered` (those this deployment does not offer, each with its `reason`)."""
    choices = tool_choices(agent_name=agent_name)
    return {"tool_choices": choices, "tools_not_offered": [c for c in choices if c.get("unavailable")]}


@member_required
def agent_list(request):
    """List the org's agents with their run counts (spec 003: GET /v1/agents)."""
    return render(request, "console/agents/list.html", {"agents": selectors.agent_list(), "external": AgentHosting.EXTERNAL, "nav": "agents"})


@org_admin_required
@require_http_methods(["GET", "POST"])
def agent_create(request):
    """Show the create form; on POST define the agent via `agents.services.agent_create`."""
    form = AgentForm(request.POST or None)
    error, field_errors = None, {}
    if request.method == "POST" and form.is_valid():
        try:
            data = form.to_input(include_name=True)
            field_errors = services.agent_input_errors(data=data)
            if not field_errors:
                agent = services.agent_create(data=data)
        except ApiError as exc:
            error = exc.message
        else:
            if not field_errors:
                messages.success(request, f"Agent {agent.name} created.")
                return redirect("console:agent", ref=agent.name)
    return render(
        request,
        "console/agents/form.html",
        {"form": form, **_errors(error, field_errors), "creating": True, "catalog": _catalog(), **_tools(), "nav": "agents"},
        status=400 if error or field_errors else 200,
    )


def _errors(error: str | None, field_errors: dict[str, str]) -> dict:
    """Return the form's error context: `error` (the one sentence of a refusal that is not one
    field's), `field_errors` ({field: message}, each shown under its field) and `error_count`."""
    order = list(AgentForm.base_fields)  # listed in the order the form shows the fields
    ordered = dict(sorted(field_errors.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)))
    return {"error": error, "field_errors": ordered, "error_count": len(field_errors) + (1 if error else 0)}


def reach(request, agent) -> list[dict]:
    """Return how a client reaches `agent`, each a copyable address: `[{key, label, url, note}]`.

    A platform agent: its run route, the OpenAI-compatible base URL (`model` = its name), the MCP
    server (its tool = its name) and its A2A card; an identity agent (its brain runs elsewhere):
    its A2A card only (the manifest it signed; 404 until it registers one).
    """
    root = request.build_absolute_uri("/").rstrip("/")
    card = {"key": "a2a", "label": "A2A card", "url": f"{root}/v1/agents/{agent.name}/a2a/.well-known/agent-card.json",
            "note": "A2A JSON-RPC at the same address without /.well-known/…" if agent.hosting != AgentHosting.EXTERNAL
            else "the capability manifest the agent signed"}
    if agent.hosting == AgentHosting.EXTERNAL:
        return [card]
    return [
        {"key": "api", "label": "API", "url": f"{root}/v1/agents/{agent.name}/run", "note": 'POST {"input": "…"} with an API key'},
        {"key": "openai", "label": "OpenAI base URL", "url": f"{root}/v1/agents/openai/v1", "note": f'model "{agent.name}"'},
        {"key": "mcp", "label": "MCP server", "url": f"{root}/v1/agents/mcp", "note": f'streamable HTTP; tool "{agent.name}"'},
        card,
    ]


def identity_manifest(agent) -> dict:
    """Return what the page shows of identity agent `agent`'s capability manifest (docs/manifests.md).

    `{"registered": False, "register_url"}` when it has registered none; else `{"registered": True,
    "summary": identity.presenters.manifest_summary, "card": <the signed card, indented JSON>,
    "signing_kid", "key_status" (KeyStatus of that key now), "verification"
    (`identity.selectors.manifest_verification`: the API's own check, run now), "problem" (the
    sentence of a failed check, "" when it verifies), "registered_at"}`.
    """
    register_url = f"/v1/identity/agents/{agent.id}/manifest"
    try:
        manifest = identity_selectors.manifest_get(agent_id=agent.id)
    except NotFound:
        return {"registered": False, "register_url": register_url}
    verification = identity_selectors.manifest_verification(manifest)
    return {
        "registered": True, "register_url": register_url, "summary": manifest_summary(manifest.card),
        "card": json.dumps(manifest.card, indent=2, ensure_ascii=False), "signing_kid": manifest.signing_kid,
        "key_status": identity_selectors.manifest_key_status(manifest), "verification": verification,
        "problem": "" if verification["verifies"] else f"{MANIFEST_REASONS[verification['reason']]}: {verification['field']}",
        "registered_at": manifest.registered_at,
    }


@member_required
def agent_detail(request, ref: str):
    """Show one agent, how to reach it, its run form and its newest runs (spec 003: GET /v1/agents/{ref});
    an identity agent also its capability manifest (`identity_manifest`)."""
    agent = selectors.agent_get(ref=ref)
    return render(
        request,
        "console/agents/detail.html",
        {
            "agent": agent,
            "runs": run_selectors.runs_recent(agent=agent, limit=10),
            "run_count": run_selectors.run_count(agent=agent),
            "run_form": RunForm(),
            "inference_configured": inference_configured(),
            "reply_tokens": output_token_cap(agent.max_tokens),  # what a reply may hold: the agent's value, capped
            "reach": reach(request, agent),
            "manifest": identity_manifest(agent) if agent.hosting == AgentHosting.EXTERNAL else None,
            "nav": "agents",
        },
    )


@member_required
def agent_runs(request, ref: str):
    """Show `agent`'s run history, newest first, 20 a page (`?cursor=` from the "Older" link).

    A cursor the list did not hand out (edited by hand, or from another list) starts over at
    the newest page.
    """
    agent = selectors.agent_get(ref=ref)
    cursor = request.GET.get("cursor") or None
    try:
        page = run_history_page(agent=agent, cursor=cursor)
    except InvalidRequest:
        return redirect("console:agent-runs", ref=agent.name)
    context = {"agent": agent, "page": page, "paged": cursor is not None, "run_count": run_selectors.run_count(agent=agent), "nav": "agents"}
    return render(request, "console/agents/runs.html", context)


@org_admin_required
@require_http_methods(["GET", "POST"])
def agent_edit(request, ref: str):
    """Show the edit form; on POST change the agent via `agents.services.agent_update`."""
    agent = selectors.agent_get(ref=ref)
    error, field_errors = None, {}
    if request.method == "POST":
        form = AgentForm(request.POST)
        if form.is_valid():
            try:
                data = form.to_input(include_name=False)
                field_errors = services.agent_input_errors(data=data, agent_name=agent.name)
                if not field_errors:
                    agent = services.agent_update(ref=agent.pk, data=data)
            except ApiError as exc:
                error = exc.message
            else:
                if not field_errors:
                    messages.success(request, f"Agent {agent.name} saved.")
                    return redirect("console:agent", ref=agent.name)
    else:
        form = AgentForm.for_agent(agent)
    return render(
        request,
        "console/agents/form.html",
        {"form": form, "agent": agent, **_errors(error, field_errors), "creating": False, "catalog": _catalog(),
         **_tools(agent.name), "nav": "agents"},
        status=400 if error or field_errors else 200,
    )


@org_admin_required
@require_http_methods(["GET", "POST"])
def agent_delete(request, ref: str):
    """Ask for confirmation; on POST remove the agent and its runs (spec 003: DELETE)."""
    agent = selectors.agent_get(ref=ref)
    if request.method == "POST":
        services.agent_delete(ref=agent.pk)
        messages.success(request, f"Agent {agent.name} and its runs were deleted.")
        return redirect("console:agents")
    return render(
        request,
        "console/agents/delete.html",
        {"agent": agent, "run_count": run_selectors.run_count(agent=agent), "nav": "agents"},
    )
