"""Which tool calls of an agent wait for a person: the agent's `approval` rules (issue 28 item 1).

`approval` is `{"tools": [pattern, …]}`: a pattern is a tool name the agent has (`http_get`,
`agent_worker`, `mcp__github__create_issue`) or a prefix ending in `*` (`agent_*`,
`mcp__github__*`) that matches at least one of them. `{}` or `{"tools": []}` asks for nothing.
"""

from __future__ import annotations

from agents_site.errors import InvalidRequest
from toolkit.approval import needs_approval, pattern_matches  # noqa: F401  (the one matcher, shared with the runner)

MAX_PATTERNS = 64
MAX_PATTERN_CHARS = 200


def has_rules(agent) -> bool:
    """Return True when `agent` (an `Agent`, or None) asks for approval of any tool."""
    return bool(agent is not None and ((getattr(agent, "approval", None) or {}).get("tools")))


def clean_approval(value, *, tools: list[str]) -> dict:
    """Return `value` as stored approval rules, checked against the agent's `tools`; else 400.

    In: `{"tools": [str, …]}` (None → `{}`). Each pattern is a non-empty string of at most
    200 characters naming a tool of `tools` exactly, or a prefix ending in one `*` that
    matches at least one of them; duplicates are dropped, order kept; at most 64. Raises
    `InvalidRequest` naming every bad entry at once, joined by "; ", e.g.
    "approval.tools[1]: 'shell' names none of this agent's tools; approval.tools[3]: '*' may
    only end a prefix". Example: ({"tools": ["agent_*"]}, tools=["agent_a", "http_get"]) →
    `{"tools": ["agent_*"]}`.
    """
    if value is None:
        return {}
    if not isinstance(value, dict) or set(value) - {"tools"}:
        raise InvalidRequest('approval must be an object {"tools": [tool name or prefix*, …]}')
    patterns = value.get("tools") or []
    if not isinstance(patterns, list):
        raise InvalidRequest("approval.tools must be a list of tool names or prefixes ending in *")
    if len(patterns) > MAX_PATTERNS:
        raise InvalidRequest(f"approval.tools has at most {MAX_PATTERNS} entries")
    cleaned: list[str] = []
    problems: list[str] = []
    for index, pattern in enumerate(patterns):
        where = f"approval.tools[{index}]"
        if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_PATTERN_CHARS:
            problems.append(f"{where} must be a tool name or a prefix ending in * (1 to {MAX_PATTERN_CHARS} characters)")
            continue
        pattern = pattern.strip()
        if "*" in pattern[:-1]:
            problems.append(f"{where}: '*' may only end a prefix")
        elif not any(pattern_matches(pattern, name) for name in tools):
            problems.append(f"{where}: {pattern!r} names none of this agent's tools")
        elif pattern not in cleaned:
            cleaned.append(pattern)
    if problems:
        raise InvalidRequest("; ".join(problems))
    return {"tools": cleaned} if cleaned else {}
