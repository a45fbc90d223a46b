"""schemathesis hooks of the contract test (loaded through `SCHEMATHESIS_HOOKS`).

A few fields are valid only against what is stored or against a rule no JSON Schema keyword
states: a tool name must name a tool the org has, a `parentSessionId`, `target` or `targetId`
must name a session or machine of the org, a `webhook` must fall under one of the org's webhook
endpoints, a `cursor` must be a `nextCursor` the list handed out, an `agent` filter must name an agent of the org, a cron must fire, a time zone must exist. The
document describes them in words; generated *valid* requests get such values from here (or
leave the field out), so the check that valid requests are accepted tests everything else.
Invalid (negative) requests are never touched: the server must refuse them as they come.
"""

from __future__ import annotations

import schemathesis
from schemathesis.generation import GenerationMode

BUILTIN_TOOLS = ("current_time", "calculator")  # built-ins that need no configuration
CRON = "*/5 * * * *"
MODEL = "test-model"  # in the loopback upstream's model list (tests/support/upstream.py)


def _positive(case) -> bool:
    meta = getattr(case, "meta", None)
    return meta is not None and meta.generation.mode == GenerationMode.POSITIVE


def _agent_body(body: dict) -> None:
    if isinstance(body.get("model"), str) and body["model"].strip():
        body["model"] = MODEL
    if isinstance(body.get("tools"), list):
        body["tools"] = [tool for tool in body["tools"] if tool in BUILTIN_TOOLS] or list(BUILTIN_TOOLS[:1])
    if isinstance(body.get("approval"), dict) and isinstance(body["approval"].get("tools"), list):
        # A rule must name one of the agent's tools: only a tool the body gives it is valid data.
        body["approval"]["tools"] = [t for t in body["approval"]["tools"] if t in (body.get("tools") or [])]
    if isinstance(body.get("schedule"), str):
        body["schedule"] = CRON
    if body.get("executionMode") == "long-running":
        body["schedule"] = CRON
    if isinstance(body.get("timezone"), str):
        body["timezone"] = "UTC"


def _session_body(body: dict, *, patch: bool) -> None:
    body.pop("parentSessionId", None)
    if body.get("target"):
        body["target"] = ""
    if patch and body.get("published") is True and not (body.get("project") or "").strip():
        body["project"] = "contract"  # the stored session may have no project to publish
    if patch and isinstance(body.get("project"), str) and not body["project"].strip() and body.get("published") is not True:
        body["published"] = False  # the stored session may be published: it cannot drop its project


def _repo_body(body: dict, *, create: bool) -> None:
    """A repo's owner/name must be new, its URL one the deployment admits, its credential granted."""
    import uuid

    body.pop("credential", None)  # only a name the operator granted to this org is valid
    body.pop("repo", None)
    if create:
        body.update(owner="contract", name=f"r{uuid.uuid4().hex[:10]}", cloneUrl="https://example.com/contract/repo.git")
    else:
        body.pop("owner", None)
        body.pop("name", None)
        if isinstance(body.get("cloneUrl"), str):
            body["cloneUrl"] = "https://example.com/contract/repo.git"
    if isinstance(body.get("defaultBranch"), str):
        body["defaultBranch"] = "main"


def _chat_body(body: dict) -> None:
    """A round runs against the loopback model; only its streaming variant is left to tests/chat/test_stream.py.

    `agent` must name an agent of the org (and not come with `preset`); `stream: true` answers
    an event stream, which schemathesis cannot check against a schema.
    """
    body.pop("agent", None)
    body.pop("stream", None)
    body.pop("webhook", None)  # only a URL under one of the org's enabled webhook endpoints is valid


@schemathesis.hook
def map_case(context, case):
    """Give a generated valid request stored references and semantic values that hold."""
    if not _positive(case):
        return case
    if isinstance(case.query, dict):
        case.query.pop("cursor", None)  # only a nextCursor this list handed out is valid
        if case.operation.path == "/v1/agents/runs":
            case.query.pop("agent", None)  # only an agent of the org is valid (another name is a 400)
    if not isinstance(case.body, dict):
        return case
    path, method = case.operation.path, case.method.upper()
    if path in ("/v1/agents", "/v1/agents/{ref}") and method in ("POST", "PATCH"):
        _agent_body(case.body)
        if method == "PATCH":
            case.body.pop("name", None)  # only the agent's own name is valid, and it changes nothing
    elif path == "/v1/agents/sessions" and method == "POST":
        _session_body(case.body, patch=False)
    elif path == "/v1/agents/sessions/{id}" and method == "PATCH":
        _session_body(case.body, patch=True)
    elif path == "/v1/agents/{ref}/run" and method == "POST":
        case.body.pop("targetId", None)
        case.body.pop("webhook", None)  # only a URL under one of the org's enabled webhook endpoints is valid
    elif path == "/v1/agents/chat" and method == "POST":
        _chat_body(case.body)
    elif path == "/v1/agents/repos" and method == "POST":
        _repo_body(case.body, create=True)
    elif path == "/v1/agents/repos/{owner}/{name}" and method == "PATCH":
        _repo_body(case.body, create=False)
    elif path in ("/v1/agents/webhooks", "/v1/agents/webhooks/{webhook_id}") and method in ("POST", "PATCH"):
        _webhook_body(case.body)
    return case


def _webhook_body(body: dict) -> None:
    """An endpoint must be a public address (the outbound door refuses loopback and private ones).

    The stateful phase feeds an address another answer handed out — a share link's `url` on the
    live server itself, at 127.0.0.1 — into `url`: such a value is replaced by a public one.
    """
    url = body.get("url")
    if isinstance(url, str) and ("//127." in url or "//localhost" in url or "//[::1]" in url):
        body["url"] = "https://hooks.example.com/in"
