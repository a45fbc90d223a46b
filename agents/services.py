"""Writes of agent definitions (spec 003: POST/PATCH/DELETE /v1/agents). Org context required."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from agents.hooks import run_agent_delete_handlers
from agents_site.ids import mint_id
from agents.inference import model_catalog
from agents.modes import validate_lifecycle, validate_timezone
from agents.approval_rules import clean_approval
from agents.models import Agent
from agents.names import reserved_names
from agents.selectors import agent_get
from agents_site.errors import Conflict, InvalidRequest
from agents_site.vocabulary import AgentHosting, ErrorCode, ExecutionMode
from agents.tools.registry import validate_tool_names
from tenancy import stores

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
NAME_RE = re.compile(NAME_PATTERN)
MAX_INSTRUCTIONS_BYTES = 32 * 1024
MAX_TOOLS = 64
MAX_TOOL_NAME = 128
MAX_REF_BYTES = 256
MAX_MODEL_CHARS = 200  # the column's width; the catalog check does not bound a fail-open gateway

UNSET = object()


class AgentExists(Conflict):
    """409: an agent with that name already exists in the org."""

    code = ErrorCode.AGENT_EXISTS
    default_message = "agent already exists in this org"


class LongRunningLimit(Conflict):
    """409: the org already has its cap of long-running agents."""

    code = ErrorCode.LONG_RUNNING_LIMIT


def _clean_name(name: str | None) -> str:
    name = (name or "").strip()
    if not name:
        raise InvalidRequest("name is required")
    if not NAME_RE.fullmatch(name):
        raise InvalidRequest(f"name must match {NAME_PATTERN}")
    if name in reserved_names():
        raise InvalidRequest(f'name "{name}" is reserved: /v1/agents/{name} is a route of the API, so the agent could not be reached by name')
    return name


def _clean_model(model: str | None, *, required: bool) -> str:
    model = (model or "").strip()
    if not model:
        if required:
            raise InvalidRequest("model cannot be empty")
        return settings.AGENTS_DEFAULT_MODEL
    if len(model) > MAX_MODEL_CHARS:
        raise InvalidRequest("model too long")
    catalog = model_catalog()
    if catalog is not None and model not in catalog:
        raise InvalidRequest(f'model "{model}" is not in this gateway\'s catalog')
    return model


def _clean_instructions(instructions: str | None) -> str:
    instructions = instructions or ""
    if len(instructions.encode()) > MAX_INSTRUCTIONS_BYTES:
        raise InvalidRequest("instructions too large")
    return instructions


def clean_tools(tools: list[str] | None) -> list[str]:
    """Return tool names trimmed, without blanks, de-duplicated in order.

    Raises `InvalidRequest` for a name over 128 characters or more than 64 names.
    """
    cleaned: list[str] = []
    for raw in tools or []:
        name = raw.strip()
        if not name or name in cleaned:
            continue
        if len(name) > MAX_TOOL_NAME:
            raise InvalidRequest(f"tool names are at most {MAX_TOOL_NAME} characters")
        cleaned.append(name)
    if len(cleaned) > MAX_TOOLS:
        raise InvalidRequest(f"an agent has at most {MAX_TOOLS} tools")
    return cleaned


def _validate_tools(tools: list[str], *, agent_name: str) -> list[str]:
    # The tool registry (agents.tools) refuses unknown names.
    validate_tool_names(tools, agent_name=agent_name)
    return tools


def _clean_ref(value: str | None, label: str) -> str:
    value = (value or "").strip()
    if len(value.encode()) > MAX_REF_BYTES:
        raise InvalidRequest(f"{label} too long")
    return value


#: The `org_atomic(serialize=...)` key of the long-running cap: counting the org's long-running
#: agents and adding one take turns across processes (READ COMMITTED would let two pass at once).
LONG_RUNNING_CAP = "long-running-cap"


def _check_long_running_cap(*, excluding: str | None = None) -> None:
    cap = settings.CLOUD_AGENT_MAX_LONG_RUNNING
    if cap <= 0:
        cap = 100
    qs = Agent.objects.filter(execution_mode=ExecutionMode.LONG_RUNNING).exclude(schedule="")
    if excluding:
        qs = qs.exclude(pk=excluding)
    if qs.count() >= cap:
        raise LongRunningLimit(f"long-running agent limit reached for this org (max {cap})")


@dataclass
class AgentInput:
    """The fields of an agent create/patch; `UNSET` marks a field the request omitted."""

    name: object = UNSET
    model: object = UNSET
    instructions: object = UNSET
    description: object = UNSET
    tools: object = UNSET
    execution_mode: object = UNSET
    schedule: object = UNSET
    timezone: object = UNSET
    compute_ref: object = UNSET
    service_account_id: object = UNSET
    max_tokens: object = UNSET
    temperature: object = UNSET
    top_p: object = UNSET
    context_window: object = UNSET
    approval: object = UNSET


def _given(value: object) -> bool:
    return value is not UNSET


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def clean_generation(*, max_tokens: object = UNSET, temperature: object = UNSET, top_p: object = UNSET,
                     context_window: object = UNSET) -> dict:
    """Return the given generation settings validated, as model field values (omitted ones left out).

    `max_tokens`: an integer from 1 to `AGENTS_MAX_OUTPUT_TOKENS`; `temperature`: a number from
    0 to 2; `top_p`: a number above 0 and at most 1; `context_window`: an integer from 256 to
    10 000 000 (tokens). Raises `InvalidRequest` (400) naming the
    wire field. None clears a setting (the gateway's default again; the API treats JSON null as
    omitted, the console's empty field clears). Example: `clean_generation(temperature=0.2)` →
    `{"temperature": 0.2}`; `clean_generation(top_p=None)` → `{"top_p": None}`.
    """
    cleaned: dict = {}
    for field, value in (("max_tokens", max_tokens), ("temperature", temperature), ("top_p", top_p), ("context_window", context_window)):
        if value is None:
            cleaned[field] = None
    if _given(max_tokens) and max_tokens is not None:
        cap = settings.AGENTS_MAX_OUTPUT_TOKENS
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= cap:
            raise InvalidRequest(f"maxTokens must be an integer from 1 to {cap} (this deployment's cap)")
        cleaned["max_tokens"] = max_tokens
    if _given(temperature) and temperature is not None:
        value = _finite(temperature)
        if value is None or not 0 <= value <= 2:
            raise InvalidRequest("temperature must be a number from 0 to 2")
        cleaned["temperature"] = value
    if _given(top_p) and top_p is not None:
        value = _finite(top_p)
        if value is None or not 0 < value <= 1:
            raise InvalidRequest("topP must be a number above 0 and at most 1")
        cleaned["top_p"] = value
    if _given(context_window) and context_window is not None:
        low, high = 256, 10_000_000
        if isinstance(context_window, bool) or not isinstance(context_window, int) or not low <= context_window <= high:
            raise InvalidRequest(f"contextWindow must be an integer from {low} to {high} (tokens)")
        cleaned["context_window"] = context_window
    return cleaned


def agent_input_errors(*, data: AgentInput, agent_name: str = "") -> dict[str, str]:
    """Return every field of `data` the create/update checks refuse, `{AgentInput field: message}`
    ({} when all pass), judging each field on its own so a form can show every error at once.

    The messages are the ones `agent_create` / `agent_update` raise (those stop at the first);
    checks that need the store's state (a name taken, the long-running cap) are left to them.
    `agent_name` is the agent being edited ("" when creating: `data.name` is judged then).
    Reads only; org context required (tool names are checked against the org's agents).
    Example: `agent_input_errors(data=AgentInput(name="", temperature=5))` →
    `{"name": "name is required", "temperature": "temperature must be a number from 0 to 2"}`.
    """
    errors: dict[str, str] = {}

    def judge(field: str, check) -> None:
        try:
            check()
        except InvalidRequest as exc:
            errors.setdefault(field, exc.message)

    name = agent_name
    if not agent_name:
        judge("name", lambda: _clean_name(data.name if _given(data.name) else None))
        name = str(data.name).strip() if _given(data.name) and data.name else ""
    if _given(data.model):
        judge("model", lambda: _clean_model(data.model, required=bool(agent_name)))
    if _given(data.instructions):
        judge("instructions", lambda: _clean_instructions(data.instructions))
    if _given(data.tools):
        judge("tools", lambda: _validate_tools(clean_tools(data.tools), agent_name=name))
    if _given(data.execution_mode) or _given(data.schedule):
        field = "schedule" if _given(data.schedule) and data.schedule else "execution_mode"
        judge(field, lambda: validate_lifecycle(data.execution_mode if _given(data.execution_mode) else None,
                                                data.schedule if _given(data.schedule) else None))
    if _given(data.timezone):
        judge("timezone", lambda: validate_timezone(data.timezone))
    for field in ("max_tokens", "temperature", "top_p", "context_window"):
        value = getattr(data, field)
        if _given(value):
            judge(field, lambda field=field, value=value: clean_generation(**{field: value}))
    if _given(data.approval) and "tools" not in errors:
        # Every bad entry at once, against the tools the agent will have (the form's, else its stored ones).
        judge("approval", lambda: clean_approval(data.approval, tools=_tools_after(data, agent_name)))
    return errors


def _tools_after(data: AgentInput, agent_name: str) -> list[str]:
    """Return the tool names the agent will have once `data` is applied (for judging its approval rules)."""
    if _given(data.tools):
        return clean_tools(data.tools)
    if not agent_name:
        return []
    return list(Agent.objects.filter(name=agent_name).values_list("tools", flat=True).first() or [])


def agent_create(*, data: AgentInput) -> Agent:
    """Define an agent in the current org; return it (spec 003: POST /v1/agents → 201).

    Validation order and messages follow reference §2.1. Raises `InvalidRequest` (400),
    `LongRunningLimit` (409) or `AgentExists` (409); nothing is written on any error.
    """
    name = _clean_name(data.name if _given(data.name) else None)
    model = _clean_model(data.model if _given(data.model) else None, required=False)
    instructions = _clean_instructions(data.instructions if _given(data.instructions) else None)
    mode, schedule = validate_lifecycle(
        data.execution_mode if _given(data.execution_mode) else None,
        data.schedule if _given(data.schedule) else None,
    )
    tz = validate_timezone(data.timezone if _given(data.timezone) else None)
    compute_ref = _clean_ref(data.compute_ref if _given(data.compute_ref) else None, "computeRef")
    service_account_id = _clean_ref(data.service_account_id if _given(data.service_account_id) else None, "serviceAccountId")
    tools = _validate_tools(clean_tools(data.tools if _given(data.tools) else None), agent_name=name)
    approval = clean_approval(data.approval if _given(data.approval) else None, tools=tools)
    description = ((data.description if _given(data.description) else "") or "").strip()
    generation = clean_generation(max_tokens=data.max_tokens, temperature=data.temperature, top_p=data.top_p,
                                  context_window=data.context_window)
    now = timezone.now()
    try:
        with stores.org_atomic(serialize=LONG_RUNNING_CAP if mode == ExecutionMode.LONG_RUNNING else False):
            if mode == ExecutionMode.LONG_RUNNING:
                _check_long_running_cap()
            if Agent.objects.filter(name=name).exists():
                raise AgentExists()
            return Agent.objects.create(
                id=mint_id("agent"),
                name=name,
                model=model,
                instructions=instructions,
                description=description,
                tools=tools,
                approval=approval,
                execution_mode=mode,
                schedule=schedule,
                timezone=tz,
                compute_ref=compute_ref,
                service_account_id=service_account_id,
                created_at=now,
                updated_at=now,
                **generation,
            )
    except IntegrityError as exc:
        raise AgentExists() from exc


def agent_update(*, ref: str, data: AgentInput) -> Agent:
    """Change agent `ref` in place; omitted fields keep their value (spec 003: PATCH).

    The resulting mode and schedule are validated together; a transition into long-running
    counts against the org's cap (409). Raises `NotFound`, `InvalidRequest`, `LongRunningLimit`.
    """
    model = None
    if _given(data.model):
        agent_get(ref=ref)  # an unknown agent is a 404 before its model is judged
        model = _clean_model(data.model, required=True)  # may ask the gateway: not under the write lock
    may_enter_cap = _given(data.execution_mode) or _given(data.schedule)
    with stores.org_atomic(serialize=LONG_RUNNING_CAP if may_enter_cap else False):
        agent = agent_get(ref=ref)
        generation = clean_generation(max_tokens=data.max_tokens, temperature=data.temperature, top_p=data.top_p,
                                      context_window=data.context_window)
        was_long_running = agent.execution_mode == ExecutionMode.LONG_RUNNING and bool(agent.schedule)
        if model is not None:
            agent.model = model
        if _given(data.instructions):
            agent.instructions = _clean_instructions(data.instructions)
        mode = data.execution_mode if _given(data.execution_mode) else agent.execution_mode
        schedule = data.schedule if _given(data.schedule) else agent.schedule
        agent.execution_mode, agent.schedule = validate_lifecycle(mode, schedule)
        if _given(data.timezone):
            agent.timezone = validate_timezone(data.timezone)
        if _given(data.compute_ref):
            agent.compute_ref = _clean_ref(data.compute_ref, "computeRef")
        if _given(data.service_account_id):
            agent.service_account_id = _clean_ref(data.service_account_id, "serviceAccountId")
        if _given(data.tools):
            agent.tools = _validate_tools(clean_tools(data.tools), agent_name=agent.name)
        if _given(data.approval) or _given(data.tools):  # rules always name tools the agent has
            agent.approval = clean_approval(data.approval if _given(data.approval) else agent.approval, tools=list(agent.tools or []))
        if _given(data.description):
            agent.description = (data.description or "").strip()
        for field, value in generation.items():
            setattr(agent, field, value)
        if agent.execution_mode == ExecutionMode.LONG_RUNNING and not was_long_running:
            _check_long_running_cap(excluding=agent.pk)
        agent.updated_at = timezone.now()
        agent.save()
    return agent


def agent_create_external(*, name: str, description: str = "") -> Agent:
    """Define an agent whose brain runs elsewhere (`hosting: external`) in the current org.

    For identity agents (spec 001): no model, instructions or tools; never executed here.
    `name` must be a valid agent name (`NAME_PATTERN`). Raises `InvalidRequest` (400) or
    `AgentExists` (409). Joins the caller's org-store transaction when there is one.
    """
    name = _clean_name(name)
    now = timezone.now()
    try:
        with stores.org_atomic():
            if Agent.objects.filter(name=name).exists():
                raise AgentExists()
            return Agent.objects.create(
                id=mint_id("agent"),
                name=name,
                model="",
                description=(description or "").strip(),
                hosting=AgentHosting.EXTERNAL,
                created_at=now,
                updated_at=now,
            )
    except IntegrityError as exc:
        raise AgentExists() from exc


def agent_delete(*, ref: str) -> None:
    """Remove agent `ref` and every run recorded against it (spec 003: DELETE → 204).

    Every handler registered with `agents.hooks.register_agent_delete_handler` runs first, in
    the same org-store transaction (e.g. identity's cascade: relations terminated, users
    alerted, credentials revoked); if one raises, nothing is deleted.
    """
    with stores.org_atomic():
        agent = agent_get(ref=ref)
        run_agent_delete_handlers(agent)
        agent.runs.all().delete()
        agent.delete()
