"""Which tool calls wait for a person: matching an agent's `approval` rules (issue 28).

Shared by the server's run loop (`agents.approval_rules`, which also validates the rules) and
the runner's loop on a machine (`runner.execute`): one matcher, so a routed run asks for exactly
the calls a run on the server would. `rules` is `{"tools": [pattern, …]}`; a pattern is a tool
name, or a prefix ending in `*`.
"""

from __future__ import annotations


def pattern_matches(pattern: str, name: str) -> bool:
    """Return True when tool `name` is named by `pattern` (exact, or a prefix before a final `*`).

    Example: ("mcp__github__*", "mcp__github__create_issue") → True; ("http_get", "http_get2") → False.
    """
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def needs_approval(rules: dict | None, name: str) -> bool:
    """Return True when a call of tool `name` must wait for a person under the agent's `rules`."""
    patterns = (rules or {}).get("tools") if isinstance(rules, dict) else None
    return any(isinstance(p, str) and pattern_matches(p, name) for p in (patterns or []))
