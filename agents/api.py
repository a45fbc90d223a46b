"""Agent definition routes (spec 003: /v1/agents, /v1/agents/{ref}). Thin: parse, call, shape."""

from django.http import HttpResponse
from ninja import Router, Status

from agents import selectors, services
from agents.presenters import agent_detail_view, agent_view
from agents.schemas import AgentDetailOut, AgentIn, AgentListOut, AgentOut, ErrorOut
from agents.services import AgentInput
from agents_site.errors import ApiError
from agents_site.pagination import cursor_param, limit_param

router = Router(tags=["agents"])

_WIRE_TO_FIELD = {
    "name": "name",
    "model": "model",
    "instructions": "instructions",
    "description": "description",
    "tools": "tools",
    "executionMode": "execution_mode",
    "schedule": "schedule",
    "timezone": "timezone",
    "computeRef": "compute_ref",
    "serviceAccountId": "service_account_id",
}


def _input(payload: AgentIn, *, allow_name: bool) -> AgentInput:
    # JSON null is an omitted field (reference §2.1: optional pointers), never "clear it": a
    # client echoing a view with `"schedule": null` must not turn a long-running agent one-shot.
    given = {k: v for k, v in payload.model_dump(exclude_unset=True).items() if v is not None}
    if not allow_name:
        given.pop("name", None)
    return AgentInput(**{_WIRE_TO_FIELD[k]: v for k, v in given.items() if k in _WIRE_TO_FIELD})


@router.get("", response={200: AgentListOut, 400: ErrorOut}, summary="List the org's agents", exclude_none=True)
def list_agents(
    request,
    limit: int = limit_param(default=selectors.AGENTS_DEFAULT_LIMIT, maximum=selectors.AGENTS_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return one page of the caller org's agents, most recently changed first, each with its run
    count; `nextCursor` reads the next page."""
    page = selectors.agent_page(limit=limit, cursor=cursor)
    return {"agents": [agent_view(a, runs=a.run_count) for a in page.items], "nextCursor": page.next_cursor}


@router.post("", response={201: AgentOut}, summary="Define an agent", exclude_none=True)
def create_agent(request, payload: AgentIn):
    """Define an agent in the caller's org (spec 003: POST /v1/agents) → 201."""
    agent = services.agent_create(data=_input(payload, allow_name=True))
    return Status(201, agent_view(agent, runs=0))


@router.get("/{ref}", response=AgentDetailOut, summary="Read one agent", exclude_none=True)
def get_agent(request, ref: str):
    """Return one agent with instructions and its 20 newest runs (spec 003: GET /v1/agents/{ref})."""
    agent = selectors.agent_get(ref=ref)
    return agent_detail_view(agent, recent_runs=selectors.runs_recent(agent=agent, limit=20))


@router.patch("/{ref}", response=AgentOut, summary="Change an agent", exclude_none=True)
def patch_agent(request, ref: str, payload: AgentIn):
    """Change an agent in place; omitted fields keep their value (spec 003: PATCH /v1/agents/{ref})."""
    if "name" in payload.model_fields_set and payload.name is not None:
        current = selectors.agent_get(ref=ref)
        if payload.name.strip() != current.name:
            raise ApiError("name is immutable")
    agent = services.agent_update(ref=ref, data=_input(payload, allow_name=False))
    return agent_view(agent, runs=selectors.run_count(agent=agent))


@router.delete("/{ref}", response={204: None}, summary="Remove an agent and its runs", exclude_none=True)
def delete_agent(request, ref: str):
    """Remove an agent and every run recorded against it (spec 003: DELETE /v1/agents/{ref}) → 204."""
    services.agent_delete(ref=ref)
    return HttpResponse(status=204)
