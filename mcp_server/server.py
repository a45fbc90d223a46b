"""The MCP server's tools: the `mcp` SDK's low-level `Server` with this platform's handlers.

| tool | here |
|---|---|
| one per agent the caller may call (its name) | `{input, sessionId?}` → a run of kind `mcp` (`services.call_start`), awaited to its end or its wait for an approval; the result is the reply (text) and `{output, runId, sessionId, conversationId, status}` (structured) |
| `_read_session` | `{sessionId}` → the session's status and message turns |
| `_stop_session` | `{sessionId}` → the session's `stop` |

The two session tools start with `_`, which no agent name can (`agents.schemas.NAME_PATTERN`),
so they never collide with an agent's tool.

A call goes on to its end on the server's loop whatever becomes of the request (as every run
does); an MCP cancellation of the call (`notifications/cancelled`, or a 2026-07-28 client closing
its response stream) stops its run — the session's `stop` — and the run ends `error`,
`finishReason: stopped`, unbilled. With a progress token, the reply is sent as it is written in
`notifications/progress` (the new text in `message`, `progress` the characters so far).

Errors: an unknown tool (no agent by that name for this caller — unknown, another org's or
outside a limited key's agents alike) and arguments that are not `{input: text, sessionId?: text}`
are JSON-RPC `-32602` naming the tool or the argument; a refusal of the platform (402, 409, 422,
503, an unknown session) and a run that ended `error` are tool results with `isError: true`,
whose structured content is the one error shape `{status, code, error}` (a failed run's:
`{status: "error", runId, sessionId, error}`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from agents.execution import RunListener
from agents_site.errors import ApiError
from agents_site.vocabulary import RunStatus
from chat.rounds import RoundStart, chat_round_steps
from mcp_server import access, selectors, services
from runs.drive import drive_async, start_on_loop
from runs.streaming import in_org
from sessions.stream import read_store
from tenancy.principal import Principal

logger = logging.getLogger(__name__)

READ_TOOL = "_read_session"
STOP_TOOL = "_stop_session"
MAX_INPUT_CHARS = 128 * 1024
PRINCIPAL_KEY = "agents.principal"  # where the view leaves the caller's principal in the ASGI scope
REQUEST_ID_KEY = "agents.request_id"

_SESSION_ID = {"type": "string", "description": "A sessionId an earlier call of this server answered.", "maxLength": 128}
AGENT_INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "What to ask the agent."},
        "sessionId": {**_SESSION_ID, "description": "Continue the conversation of an earlier call of this agent: its sessionId."},
    },
    "required": ["input"],
    "additionalProperties": False,
}
AGENT_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "output": {"type": "string", "description": "The agent's reply (empty while the run waits for an approval)."},
        "runId": {"type": "string"},
        "sessionId": {"type": "string", "description": "The run's session: read it, stop it, or continue its conversation."},
        "conversationId": {"type": "string"},
        "status": {"type": "string", "enum": [RunStatus.OK.value, RunStatus.WAITING.value]},
    },
    "required": ["output", "runId", "sessionId", "status"],
}
SESSION_INPUT_SCHEMA = {"type": "object", "properties": {"sessionId": _SESSION_ID}, "required": ["sessionId"],
                        "additionalProperties": False}


def _session_tools() -> list[types.Tool]:
    return [
        types.Tool(name=READ_TOOL, title="Read a session",
                   description="Read a session's status and its message turns (oldest first, at most 200): what a call "
                               "of an agent was asked and answered, or how far a waiting run got.",
                   input_schema=SESSION_INPUT_SCHEMA,
                   annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=False)),
        types.Tool(name=STOP_TOOL, title="Stop a session",
                   description="Stop the run of a session (a call in flight, or one waiting for an approval): it ends "
                               "with an error 'stopped' and is not billed.",
                   input_schema=SESSION_INPUT_SCHEMA,
                   annotations=types.ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False)),
    ]


def agent_tool(agent) -> types.Tool:
    """Return the MCP tool of `agent`: its name, its description (else its instructions' first line)."""
    description = (agent.description or "").strip() or (agent.instructions or "").strip().split("\n", 1)[0][:300]
    return types.Tool(name=agent.name, title=agent.name, description=description or f"Ask the agent {agent.name}.",
                      input_schema=AGENT_INPUT_SCHEMA, output_schema=AGENT_OUTPUT_SCHEMA,
                      annotations=types.ToolAnnotations(open_world_hint=True))


def principal_of(ctx) -> Principal:
    """Return the caller's principal the view put in the request's ASGI scope (every HTTP request
    of a session is authenticated again: a revoked key is refused at its next request)."""
    request = getattr(ctx, "request", None)
    principal = request.scope.get(PRINCIPAL_KEY) if request is not None else None
    if principal is None:  # only the view reaches this server, and it always sets one
        raise MCPError(types.INVALID_REQUEST, "no caller: this server is reached at /v1/agents/mcp with a bearer API key")
    return principal


def _request_id(ctx) -> str:
    request = getattr(ctx, "request", None)
    return (request.scope.get(REQUEST_ID_KEY, "") if request is not None else "") or ""


def error_result(error: ApiError) -> types.CallToolResult:
    """Return a platform refusal as a tool error: its sentence as text, `{status, code, error}` structured."""
    body = {key: value for key, value in error.body().items() if key in ("status", "code", "error")}
    return types.CallToolResult(content=[types.TextContent(type="text", text=error.message)], structured_content=body,
                                is_error=True)


def _argument(arguments: dict, name: str, *, required: bool) -> str:
    value = arguments.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise MCPError(types.INVALID_PARAMS, f"argument {name!r} must be text" if value is not None else f"argument {name!r} is required")
    return value


def _arguments(arguments: Any, allowed: tuple[str, ...]) -> dict:
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise MCPError(types.INVALID_PARAMS, "arguments must be an object")
    unknown = sorted(set(arguments) - set(allowed))
    if unknown:
        raise MCPError(types.INVALID_PARAMS, f"unknown argument {unknown[0]!r}; this tool takes {', '.join(allowed)}")
    return arguments


class _Progress(RunListener):
    """Hear a running call's reply on the step threads; hand each piece to the call's queue on its loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue) -> None:
        self.loop, self.queue = loop, queue

    def delta(self, text: str) -> None:
        if text:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, text)


_DONE = object()


async def _store(org: str, fn, **kwargs):
    """Run store work `fn(**kwargs)` for `org` in a thread (`sessions.stream.read_store`)."""
    return await read_store(org, fn, **kwargs)


async def list_tools(ctx, params) -> types.ListToolsResult:
    """`tools/list`: one tool per agent the caller may call, then the two session tools."""
    principal = principal_of(ctx)
    agents = await _store(principal.org_slug, selectors.tool_agents, principal=principal)
    return types.ListToolsResult(tools=[agent_tool(a) for a in agents] + _session_tools())


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    """`tools/call`: a session tool, or a call of an agent (see the module text)."""
    principal = principal_of(ctx)
    if params.name in (READ_TOOL, STOP_TOOL):
        session_id = _argument(_arguments(params.arguments, ("sessionId",)), "sessionId", required=True)
        try:
            if params.name == READ_TOOL:
                return _turns_result(await _store(principal.org_slug, selectors.session_turns, principal=principal,
                                                  session_id=session_id))
            stopped = await _store(principal.org_slug, services.session_stop, principal=principal, session_id=session_id)
        except ApiError as exc:
            return error_result(exc)
        text = f"stop sent to session {stopped}: its run ends 'stopped', unbilled"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content={"sessionId": stopped, "stopped": True})
    arguments = _arguments(params.arguments, ("input", "sessionId"))
    text = _argument(arguments, "input", required=True)
    session_id = _argument(arguments, "sessionId", required=False)
    if len(text) > MAX_INPUT_CHARS:
        raise MCPError(types.INVALID_PARAMS, f"argument 'input' is over {MAX_INPUT_CHARS} characters")
    try:
        agent = await _store(principal.org_slug, access.agent_for, principal=principal, ref=params.name)
    except ApiError as exc:
        if exc.status != 404:
            return error_result(exc)
        raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:128]!r}: no agent of this org by that name "
                                             "(tools/list names the ones this key may call)") from exc
    try:
        start = await _store(principal.org_slug, services.call_start, principal=principal, agent=agent, text=text,
                             session_id=session_id, request_id=_request_id(ctx))
    except ApiError as exc:
        return error_result(exc)
    run = await _follow(ctx, principal, start)
    return call_result(run, start)


async def _follow(ctx, principal: Principal, start: RoundStart):
    """Execute the started call on the loop and await its end, reporting its reply as progress;
    a cancellation of the call stops its run (the session's `stop`) and is re-raised."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    steps = in_org(principal.org_slug, chat_round_steps(start, listener=_Progress(loop, queue)))
    context = contextvars.copy_context()
    done = asyncio.wrap_future(start_on_loop(loop, lambda: drive_async(steps, context=context)))
    done.add_done_callback(lambda _f: queue.put_nowait(_DONE))
    written = 0
    try:
        while (piece := await queue.get()) is not _DONE:
            written += len(piece)
            await ctx.session.report_progress(written, None, piece)  # a no-op without a progress token
        return done.result()
    except BaseException:
        if not done.done():
            with anyio.CancelScope(shield=True):
                try:
                    await _store(principal.org_slug, services.session_stop, principal=principal,
                                 session_id=start.run.session_id)
                except ApiError:  # it ended meanwhile
                    pass
        raise


def call_result(run, start: RoundStart) -> types.CallToolResult:
    """Return the tool result of a call's run: the reply (`ok`), how to approve (`waiting`), or the
    run's error as a tool error (`error`)."""
    ids = {"runId": run.id, "sessionId": run.session_id, "conversationId": start.conversation_id}
    if run.status == RunStatus.WAITING:
        text = (f"The run {run.id} is waiting for a person to approve a tool call. Approve it with "
                f"POST /v1/agents/sessions/{run.session_id}/approve (or deny with …/deny), or in the console's "
                f"approvals; then read its reply with {READ_TOOL} {{\"sessionId\": \"{run.session_id}\"}}.")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content={"output": "", **ids, "status": RunStatus.WAITING.value})
    if run.status != RunStatus.OK:
        error = run.error or "the run failed"
        return types.CallToolResult(content=[types.TextContent(type="text", text=error)], is_error=True,
                                    structured_content={"status": str(run.status), **ids, "error": error})
    output = run.output or ""
    return types.CallToolResult(content=[types.TextContent(type="text", text=output)],
                                structured_content={"output": output, **ids, "status": RunStatus.OK.value})


def _turns_result(found: selectors.Turns) -> types.CallToolResult:
    lines = [f"session {found.session.id} ({found.session.status})"] + [f"[{t['role']}] {t['text']}" for t in found.turns]
    body = {"sessionId": found.session.id, "status": str(found.session.status), "turns": found.turns, "more": found.more}
    return types.CallToolResult(content=[types.TextContent(type="text", text="\n".join(lines))], structured_content=body)


def build_server() -> Server:
    """Return the low-level MCP `Server` of this platform (one per process; handlers are stateless)."""
    return Server("agents", version="1",
                  instructions="Each tool but the two starting with '_' is an agent of your org: call it with "
                               "{input} (and an earlier call's sessionId to continue its conversation).",
                  on_list_tools=list_tools, on_call_tool=call_tool)
