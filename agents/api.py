"""Agent definition routes (spec 003: /v1/agents, /v1/agents/{ref}). Thin: parse, call, shape.

Statuses every route shares (400, 403, 404 on a path id, 413, 503) are declared for all routes by
`server.api`; each route declares the ones of its own.
"""

from django.http import HttpResponse
from ninja import Router, Status

from agents import selectors, services
from runs import selectors as run_selectors
from agents.presenters import agent_detail_view, agent_view
from agents.schemas import AgentCreateIn, AgentDetailOut, AgentIn, AgentListOut, AgentOut
from agents.services import AgentInput
from agents_site.errors import ApiError
from agents_site.pagination import cursor_param, limit_param
from agents_site.schemas import ErrorOut

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
    "maxTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "contextWindow": "context_window",
    "approval": "approval",
}


def _input(payload: AgentIn, *, allow_name: bool) -> AgentInput:
    # JSON null is an omitted field (reference §2.1: optional pointers), never "clear it": a
    # client echoing a view with `"schedule": null` must not turn a long-running agent one-shot.
    given = {k: v for k, v in payload.model_dump(exclude_unset=True).items() if v is not None}
    if not allow_name:
        given.pop("name", None)
    return AgentInput(**{_WIRE_TO_FIELD[k]: v for k, v in given.items() if k in _WIRE_TO_FIELD})


# Docstrings of routes are the operation descriptions of the OpenAPI document: written for
# the API's users. Each route's spec 003 section is named in a comment above it.


# spec 003: GET /v1/agents
@router.get("", response=AgentListOut, summary="List the org's agents", exclude_none=True)
def list_agents(
    request,
    limit: int = limit_param(default=selectors.AGENTS_DEFAULT_LIMIT, maximum=selectors.AGENTS_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return one page of the caller org's agents, most recently changed first, each with its run
    count; `nextCursor` reads the next page."""
    page = selectors.agent_page(limit=limit, cursor=cursor)
    return {"agents": [agent_view(a, runs=a.run_count) for a in page.items], "nextCursor": page.next_cursor}


# spec 003: POST /v1/agents
@router.post("", response={201: AgentOut, 409: ErrorOut}, summary="Define an agent", exclude_none=True)
def create_agent(request, payload: AgentCreateIn):
    """Define an agent in the caller's org → 201 with it.

    409 `agent_exists` when the org already has an agent of that name, 409
    `long_running_limit` when the org has its maximum of long-running agents.
    """
    agent = services.agent_create(data=_input(payload, allow_name=True))
    return Status(201, agent_view(agent, runs=0))


# spec 003: GET /v1/agents/{ref}
@router.get("/{ref}", response={200: AgentDetailOut}, summary="Read one agent", exclude_none=True)
def get_agent(request, ref: str):
    """Return one agent, by id or name, with its instructions and its 20 newest finished runs."""
    agent = selectors.agent_get(ref=ref)
    return agent_detail_view(agent, recent_runs=run_selectors.runs_recent(agent=agent, limit=20))


# spec 003: PATCH /v1/agents/{ref}
@router.patch("/{ref}", response={200: AgentOut, 409: ErrorOut}, summary="Change an agent", exclude_none=True)
def patch_agent(request, ref: str, payload: AgentIn):
    """Change an agent in place; omitted fields keep their value. 409 `long_running_limit` when
    it would become one long-running agent too many."""
    if "name" in payload.model_fields_set and payload.name is not None:
        current = selectors.agent_get(ref=ref)
        if payload.name.strip() != current.name:
            raise ApiError("name is immutable")
    agent = services.agent_update(ref=ref, data=_input(payload, allow_name=False))
    return agent_view(agent, runs=run_selectors.run_count(agent=agent))


# spec 003: DELETE /v1/agents/{ref}
@router.delete("/{ref}", response={204: None}, summary="Remove an agent and its runs", exclude_none=True)
def delete_agent(request, ref: str):
    """Remove an agent and every run recorded against it → 204."""
    services.agent_delete(ref=ref)
    return HttpResponse(status=204)
