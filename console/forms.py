"""Console forms. They only carry the fields; every rule and message is the service's.

An agent form becomes an `agents.services.AgentInput` and goes through `agent_create` /
`agent_update`, so the console refuses exactly what the API refuses, with the same words.
"""

from __future__ import annotations

import re

from django import forms

from agents.models import Agent
from agents.services import AgentInput
from agents_site.schemas import scan_caller_text
from agents_site.vocabulary import ApiKeyScope, ExecutionMode

_TOOL_SPLIT = re.compile(r"[,\n]")


def _number(text: str | None, *, integer: bool = False):
    """Return a generation setting typed for the service: blank → None (clears it), a number →
    int/float, anything else as typed (the service refuses it in its own words)."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        return int(text) if integer else float(text)
    except ValueError:
        return text


class AgentForm(forms.Form):
    """The fields of an agent definition (spec 003: POST/PATCH /v1/agents body)."""

    name = forms.CharField(required=False, max_length=200, strip=False)
    model = forms.CharField(required=False, max_length=200, strip=False)
    description = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2}))
    instructions = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 8}))
    tools = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Tool names, one per line or separated by commas.",
    )
    approval = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Tools whose calls wait for a person to approve them: names of this agent's tools or prefixes ending in *, "
                  "one per line or separated by commas. Blank: none.",
    )
    max_tokens = forms.CharField(required=False, max_length=20, help_text="Blank: the gateway's default, within the deployment's cap.")
    temperature = forms.CharField(required=False, max_length=20, help_text="0 to 2. Blank: the gateway's default.")
    top_p = forms.CharField(required=False, max_length=20, help_text="Above 0, at most 1. Blank: the gateway's default.")
    context_window = forms.CharField(required=False, max_length=20,
                                     help_text="Tokens the model's server holds (e.g. llama.cpp --ctx-size). Blank: the gateway's metadata, else the deployment's default.")
    execution_mode = forms.ChoiceField(required=False, choices=ExecutionMode.choices, initial=ExecutionMode.ONE_SHOT)
    schedule = forms.CharField(required=False, max_length=200, strip=False, help_text="5-field cron, e.g. */15 * * * *")
    timezone = forms.CharField(required=False, max_length=64, strip=False, initial="UTC")

    @classmethod
    def for_agent(cls, agent: Agent) -> AgentForm:
        """Return a form filled with `agent`'s stored values."""
        return cls(
            initial={
                "name": agent.name,
                "model": agent.model,
                "description": agent.description,
                "instructions": agent.instructions,
                "tools": "\n".join(agent.tools or []),
                "approval": "\n".join((agent.approval or {}).get("tools") or []),
                "max_tokens": "" if agent.max_tokens is None else str(agent.max_tokens),
                "temperature": "" if agent.temperature is None else f"{agent.temperature:g}",
                "top_p": "" if agent.top_p is None else f"{agent.top_p:g}",
                "context_window": "" if agent.context_window is None else str(agent.context_window),
                "execution_mode": agent.execution_mode,
                "schedule": agent.schedule,
                "timezone": agent.timezone,
            }
        )

    def to_input(self, *, include_name: bool) -> AgentInput:
        """Return the submitted fields as an `AgentInput` (call after `is_valid()`).

        Tools are split on commas and newlines; the service trims, de-duplicates and checks them.
        Every text typed passes the credential scanner first, as an API body does: 422
        `SecretInTranscript` (an `ApiError` the view shows) names the field.
        """
        data = self.cleaned_data
        scan_caller_text({name: data.get(name) for name in ("name", "model", "description", "instructions", "tools", "approval", "schedule", "timezone")})
        tools = [t for t in _TOOL_SPLIT.split(data.get("tools") or "")]
        ruled = [t.strip() for t in _TOOL_SPLIT.split(data.get("approval") or "") if t.strip()]
        values = dict(
            model=data.get("model") or "",
            description=data.get("description") or "",
            instructions=data.get("instructions") or "",
            tools=tools,
            approval={"tools": ruled},
            execution_mode=data.get("execution_mode") or "",
            schedule=data.get("schedule") or "",
            timezone=data.get("timezone") or "",
            max_tokens=_number(data.get("max_tokens"), integer=True),
            temperature=_number(data.get("temperature")),
            top_p=_number(data.get("top_p")),
            context_window=_number(data.get("context_window"), integer=True),
        )
        if include_name:
            values["name"] = data.get("name") or ""
        return AgentInput(**values)


class ApiKeyForm(forms.Form):
    """Name a new API key and its limits (the key is minted, and its limits checked, by
    `tenancy.services.api_key_create`): `scope` (`all`, `openai` = only the OpenAI-compatible
    endpoint, `mcp` = only the MCP server) and the agents an `openai` or `mcp` key may call there
    (none ticked = every agent)."""

    name = forms.CharField(required=False, max_length=100)
    scope = forms.ChoiceField(required=False, choices=ApiKeyScope.choices, initial=ApiKeyScope.ALL)
    allowed_agents = forms.MultipleChoiceField(required=False, choices=(), widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args, agent_names: list[str] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["allowed_agents"].choices = [(name, name) for name in agent_names]


class RunForm(forms.Form):
    """The input of one run (spec 003: POST /v1/agents/{ref}/run `{"input"}`)."""

    input = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 4}))
