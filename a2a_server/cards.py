"""The A2A agent card of a platform agent (A2A v1.0 `AgentCard`), built from the agent's row.

A card says who the agent is and how to call it: `name` (the agent's name), `description`,
`version` (when the agent last changed, RFC 3339), `provider` (the org), one JSON-RPC interface
per protocol version served at `/v1/agents/{name}/a2a` (1.0, and 0.3 through the SDK's
compatibility adapter), `capabilities` (streaming; no push notifications, no extended card),
the bearer security scheme (an API key of the org or a gateway JWT), text and JSON in, text
out, and one skill per tool the agent may call (a built-in tool with its description, another
agent `agent_<name>`, an MCP server's tool `mcp__<server>__<tool>`), or one `reply` skill when
it has none. Never the instructions, the model, the approval rules or the schedule.

The public card (the org's directory, `public=True`) is the same card without the skills that
name the org's other agents or its MCP servers (their names are internal): built-in tools only.
"""

from __future__ import annotations

from google.protobuf.json_format import MessageToDict

from a2a.types import a2a_pb2 as a2a
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

from agents.models import Agent
from agents.tools.backends.builtin import BUILTIN_NAMES, builtin_description
from agents_site.wire import rfc3339

SECURITY_SCHEME = "bearer"
INPUT_MODES = ("text/plain", "application/json")
OUTPUT_MODES = ("text/plain",)
PUBLIC_PREFIX = "/v1/agents/a2a/public"


def endpoint_path(agent: Agent) -> str:
    """Return the path of `agent`'s JSON-RPC endpoint: `/v1/agents/{name}/a2a`."""
    return f"/v1/agents/{agent.name}/a2a"


def card_path(agent: Agent) -> str:
    """Return the path of `agent`'s card for the org's members: `/v1/agents/{name}/a2a/.well-known/agent-card.json`."""
    return endpoint_path(agent) + AGENT_CARD_WELL_KNOWN_PATH


def directory_path(org_slug: str) -> str:
    """Return the path of `org_slug`'s public directory: `/v1/agents/a2a/public/{org}`."""
    return f"{PUBLIC_PREFIX}/{org_slug}"


def public_card_path(org_slug: str, agent: Agent) -> str:
    """Return the path of `agent`'s public card (anyone): `/v1/agents/a2a/public/{org}/{name}/.well-known/agent-card.json`."""
    return f"{directory_path(org_slug)}/{agent.name}{AGENT_CARD_WELL_KNOWN_PATH}"


def _skill(tool: str) -> a2a.AgentSkill:
    if tool in BUILTIN_NAMES:
        return a2a.AgentSkill(id=tool, name=tool, description=builtin_description(tool), tags=["tool", "builtin"])
    if tool.startswith("agent_"):
        return a2a.AgentSkill(id=tool, name=tool, description=f"Asks the org's agent {tool[len('agent_'):]}", tags=["tool", "agent"])
    if tool.startswith("mcp__"):
        server = tool[len("mcp__"):].split("__", 1)[0]
        return a2a.AgentSkill(id=tool, name=tool, description=f"A tool of the MCP server {server}", tags=["tool", "mcp"])
    return a2a.AgentSkill(id=tool, name=tool, description=f"The tool {tool}", tags=["tool"])


def skills(agent: Agent, *, public: bool) -> list[a2a.AgentSkill]:
    """Return the card's skills: one per tool of `agent` (only built-ins when `public`), else one `reply` skill."""
    tools = [str(t) for t in (agent.tools or []) if isinstance(t, str)]
    if public:
        tools = [t for t in tools if t in BUILTIN_NAMES]
    found = [_skill(t) for t in tools]
    if found:
        return found
    return [a2a.AgentSkill(id="reply", name="reply", description=agent.description or f"Answers a message as the agent {agent.name}",
                           tags=["reply"])]


def agent_card(agent: Agent, *, base_url: str, org_slug: str, public: bool = False) -> a2a.AgentCard:
    """Return `agent`'s A2A v1.0 `AgentCard` (see the module text).

    In: the agent; `base_url`, the scheme and host the caller reached (`https://agents.example`);
    the org's slug (the provider); `public`, the directory's narrower card.
    Out: the card; its interface URLs are absolute (`{base_url}/v1/agents/{name}/a2a`).
    """
    url = base_url.rstrip("/") + endpoint_path(agent)
    card = a2a.AgentCard(
        name=agent.name,
        description=agent.description or f"The agent {agent.name} of {org_slug}",
        version=rfc3339(agent.updated_at),
        provider=a2a.AgentProvider(organization=org_slug, url=base_url.rstrip("/")),
        supported_interfaces=[
            a2a.AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_1_0),
            a2a.AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=PROTOCOL_VERSION_0_3),
        ],
        capabilities=a2a.AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=False),
        default_input_modes=list(INPUT_MODES),
        default_output_modes=list(OUTPUT_MODES),
        skills=skills(agent, public=public),
    )
    card.security_schemes[SECURITY_SCHEME].http_auth_security_scheme.CopyFrom(a2a.HTTPAuthSecurityScheme(
        scheme="Bearer", bearer_format="API key (ak_…) of the agent's org, or a gateway JWT",
        description="Authorization: Bearer <an API key of the org that owns the agent>"))
    requirement = card.security_requirements.add()
    requirement.schemes[SECURITY_SCHEME].SetInParent()
    return card


def card_body(card: a2a.AgentCard) -> dict:
    """Return `card` as the JSON of the A2A wire (camelCase, proto3 JSON mapping)."""
    return MessageToDict(card)
