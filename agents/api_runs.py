"""Run, history and dashboard routes (spec 003: POST /{ref}/run, /{ref}/runs, /runs, /activity,
/metrics, /billing). Mounted before the agents router so `/{ref}` never shadows these paths.
Thin: parse, call one service or selector, shape.
"""

from __future__ import annotations

import secrets

from django.http import JsonResponse
from django.urls import register_converter
from ninja import Path, Query, Router

from runs.hooks import request_callback
from agents import dashboards, selectors
from runs import selectors as run_selectors
from runs.background import run_submit
from agents.execution import WholeAnswer, run_open
from runs.drive import at_once
from agents.execution.service import run_execute_opened_steps, run_execute_steps
from agents.presenters import overflowed, run_view
from runs.approvals import approval_view, run_approval_history, run_approvals
from runs.routed import routed_start
from runs.streaming import answer_later, run_headers, run_stream
from agents.schemas import ActivityOut, BillingOut, MetricsOut, RunAcceptedOut, RunIn, RunListOut, RunOut
from agents_site import permissions
from agents_site.errors import InvalidRequest
from agents_site.schemas import ErrorOut, sse_frame, stream_schema, word_param
from agents_site.vocabulary import ErrorCode, MetricsRange, ReplyFrame, RunKind, RunStatus
from agents_site.wire import compact
from agents_site.pagination import cursor_param, limit_param
from billing.selectors import LEDGER_DEFAULT_LIMIT, LEDGER_MAX_LIMIT, billing_summary
from tenancy.principal import require_org

router = Router(tags=["runs"])

REQUEST_ID_MAX = 128


def _request_id(request) -> str:
    given = (request.headers.get("X-Request-Id") or "").strip()
    return given[:REQUEST_ID_MAX] if given else "req_" + secrets.token_hex(12)


def _run_limit():
    return limit_param(default=run_selectors.HISTORY_DEFAULT_LIMIT, maximum=run_selectors.HISTORY_MAX_LIMIT)


# Route docstrings are the operation descriptions of the OpenAPI document: written for users.


# spec 003: GET /v1/agents/runs
@router.get("/runs", response=RunListOut, summary="List the org's runs", exclude_none=True)
def list_org_runs(
    request,
    status: word_param(RunStatus) = Query(None, description="Only runs in this status (default: finished runs, `ok` and `error`)."),
    kind: word_param(RunKind) = Query(None, description="Only runs of this kind (default: every kind)."),
    agent: str = Query(None, max_length=selectors.MAX_REF_LENGTH,
                       description="Only runs of this agent, by id or name (default: every agent). "
                       "A name that is not an agent of the org is a 400."),
    limit: int = _run_limit(),
    cursor: str = cursor_param(),
):
    """Return one page of the org's runs across agents, of every kind unless `kind` names one and
    of every agent unless `agent` names one, newest first; `nextCursor` reads the next page (with
    the same filters)."""
    page = run_selectors.run_list_org(status=status, kind=kind, agent=selectors.run_filter_agent(agent=agent), limit=limit, cursor=cursor)
    return {"runs": [run_view(r) for r in page.items], "nextCursor": page.next_cursor}


class RunIdConverter:
    """Path converter matching a run id (`run_` + 32 hex), so `/runs/{id}` never shadows the
    routes of an agent named `runs` (`/runs/run`, `/runs/runs`)."""

    regex = r"run_[0-9a-f]{32}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(RunIdConverter, "runid")


@router.get("/runs/{runid:run_id}", response={200: RunOut}, summary="Read one run", exclude_none=True)
def get_run(request, run_id: str = Path(..., pattern=f"^{RunIdConverter.regex}$", description="A run id: `run_` and 32 hex digits.")):
    """Return one run of the caller's org, in flight (`queued`, `running`) or finished (`ok`,
    `error`). Another org's run is a 404 exactly like a missing one."""
    return _with_approvals(run_selectors.run_get(run_id=run_id))


def _with_approvals(run) -> dict:
    """Return the run's view; a `waiting` run carries the calls of its waiting turn (`approvals`), any
    other run the approval requests it asked with their outcomes (none: no `approvals`)."""
    view = run_view(run)
    if run.status == RunStatus.WAITING:
        rows = getattr(run, "approvals", None)
        rows = rows if rows is not None else run_approvals(run_id=run.id)
    else:
        rows = run_approval_history(run_id=run.id)
    if rows or run.status == RunStatus.WAITING:
        view["approvals"] = [approval_view(row, started_by=run.actor) for row in rows]
    return view


def _waiting_response(run) -> JsonResponse:
    """202 with the waiting run and its requests; `Location` is the run to poll."""
    response = JsonResponse(_with_approvals(run), status=202)
    response["Location"] = f"/v1/agents/runs/{run.id}"
    return response


# The recorded run can be read again by its id (an OpenAPI link: clients and schemathesis follow it).
_RUN_LINK = {"operationId": "agents_api_runs_get_run", "parameters": {"run_id": "$response.body#/id"}}


def _wants_async(request, payload: RunIn) -> bool:
    """Return True for `"background": true` or a `Prefer` header naming `respond-async` (RFC 7240)."""
    if payload.background:
        return True
    prefer = request.headers.get("Prefer", "")
    return any(token.split(";")[0].strip().lower() == "respond-async" for token in prefer.split(","))


@router.get("/activity", response=ActivityOut, summary="Recent activity of the org", exclude_none=True)
def activity(request):
    """Return the org's activity feed, newest first, at most 50 rows: runs invoked or failed (a
    member's own runs only; an admin's every run), agents created or updated."""
    return {"activity": dashboards.activity_feed(actor=permissions.own_actor(request.auth))}


@router.get("/metrics", response=MetricsOut, summary="Invocations over time")
def metrics(
    request,
    range: word_param(MetricsRange) = Query(None, description="The window: 24 hourly buckets, or 7 or 30 daily buckets (default `30d`)."),
):
    """Return one series of finished-run counts per agent that ran in the window (a member counts
    their own runs; an admin every run of the org)."""
    return dashboards.invocation_metrics(window=range, actor=permissions.own_actor(request.auth))


@router.get("/billing", response={200: BillingOut, 503: ErrorOut}, summary="Balance and ledger", exclude_none=True)
def billing(
    request,
    limit: int = limit_param(default=LEDGER_DEFAULT_LIMIT, maximum=LEDGER_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return the caller org's balance, the run fee and one page of its ledger, newest first, in
    cents; `nextCursor` reads the next page (org admins only: 403 for a member). 503
    `balance_unavailable` when the ledger cannot answer."""
    principal = require_org(request.auth)
    return billing_summary(org_slug=principal.org_slug, limit=limit, cursor=cursor)


_STREAM_DOC = (
    "With `\"stream\": true`: Server-Sent Events while the run executes (headers `X-Agents-Run-Id`, "
    "`X-Agents-Session-Id`). First `event: start` `data: {\"runId\", \"sessionId\"}` (watch or stop the run by them); `event: delta` "
    "`data: {\"text\"}` — a piece of the reply (credentials masked; the pieces concatenate to what was written); "
    "`event: tool` `data: {name, args, result|error}` — a tool call executed; then one `event: run` whose data is "
    "the recorded run, exactly the body the call without `stream` answers (a failed run: the run with its `error`); "
    "or, when the model called a tool needing approval, a last `event: approval` whose data is the `waiting` run with its `approvals`."
)
_RUN_RESPONSES = {status: {"links": {"GetRun": _RUN_LINK}} for status in (200, 400, 502)}
_RUN_RESPONSES[400]["description"] = (
    "Invalid request: a parameter or the body failed validation (`invalid_request`, `ErrorOut`); or the run failed because "
    "the prompt is over the model's context window: the failed run (`RunOut`) with `code` `context_length_exceeded`.")


_TEXT = {"type": "string"}
_STREAM_FRAME = stream_schema("RunStreamFrame", _STREAM_DOC, [
    sse_frame(ReplyFrame.START, {"type": "object", "required": ["runId"],
                                 "properties": {"runId": _TEXT, "sessionId": {"type": ["string", "null"]}}}),
    sse_frame(ReplyFrame.DELTA, {"type": "object", "required": ["text"], "properties": {"text": _TEXT}}),
    sse_frame(ReplyFrame.TOOL, {"type": "object", "required": ["name", "args"],
                                "properties": {"name": _TEXT, "args": {"type": "object"}, "result": _TEXT, "error": _TEXT}}),
    sse_frame(ReplyFrame.OPS, {"type": "object", "required": ["ops"], "properties": {"ops": {"type": "array", "items": {"type": "object"}}}}),
    sse_frame(ReplyFrame.RUN, {"$ref": "#/components/schemas/RunOut"}),
    sse_frame(ReplyFrame.APPROVAL, {"$ref": "#/components/schemas/RunOut"}),
    sse_frame(ReplyFrame.ERROR, {"$ref": "#/components/schemas/ErrorOut"}),
])
_RUN_RESPONSES[200]["content"] = {"text/event-stream": {"schema": _STREAM_FRAME}}


@router.post(
    "/{ref}/run",
    response={200: RunOut, 202: RunOut | RunAcceptedOut, 400: RunOut | ErrorOut, 502: RunOut, 402: ErrorOut, 409: ErrorOut,
              503: ErrorOut},
    summary="Run an agent",
    exclude_none=True,
    openapi_extra={"responses": _RUN_RESPONSES},
)
def run_agent(request, ref: str, payload: RunIn):
    """Run agent `ref` on `input` and answer the recorded run: 200, or 502 whose body is the
    failed run (its `error` says why); 400 with the failed run and `code` `context_length_exceeded`
    when the prompt is over the model's context window (the gateway said so; asked once, never re-sent).

    Checked in this order: credential (403) → agent in the caller's org (404) → input at most
    128 KiB (400) → `Idempotency-Key` replay (409 when the key was used with another body) →
    inference configured (503 `inference_unavailable`) → balance (402 `insufficient_balance`,
    503 `balance_unavailable`). A successful run is debited the run fee once. A replayed answer
    carries `Idempotent-Replayed: true`.

    With `"background": true` or `Prefer: respond-async` the run is queued for a worker after
    the same checks and the answer is 202 `{runId, sessionId}` at once
    (`Preference-Applied: respond-async`, `Location: /v1/agents/runs/{runId}`). With `targetId`
    the run is routed to that machine instead and answered 202 while it runs there.

    With `"stream": true` the same checks answer their JSON errors first; then the answer is
    200 `text/event-stream` (headers `X-Agents-Run-Id`, `X-Agents-Session-Id`): a `start` frame
    `{runId, sessionId}`, `delta` frames as the reply is written, `tool` frames, and a final
    `run` frame carrying the recorded run (a failed run too: its `error` says why). The headers
    wait for the model's first piece of the reply: a prompt over its context window found before it
    is the same 400 as without `stream`, not a stream. A client
    that leaves does not stop the run. `stream` with `background` or `targetId` is 400.

    When the model calls a tool the agent's `approval` rules name, the run suspends (`waiting`,
    holding its fee, holding no thread) and the answer is 202 with the run and its `approvals`
    (`Location: /v1/agents/runs/{runId}` to poll); a stream ends with an `approval` frame
    instead of `run`. Answer with `POST /v1/agents/sessions/{sessionId}/approve` or `…/deny`.

    `webhook` asks for this run's own `run.finished` callback: a URL under one of the org's
    webhook endpoints (same scheme, host and port, and a path under the endpoint's), signed with
    that endpoint's secret; any other URL is 400 and nothing runs.
    """
    principal = require_org(request.auth)  # checked again on purpose: this route moves money
    if payload.stream and (payload.background or payload.targetId is not None):
        raise InvalidRequest("stream cannot be combined with background or targetId: a streamed run executes in this request")
    agent = selectors.agent_get(ref=ref)
    with request_callback(payload.webhook):  # 400 for a URL outside the org's webhook endpoints
        return _run(request, agent, payload, principal)


def _run(request, agent, payload: RunIn, principal):
    if payload.stream:
        return _streamed(request, agent, payload, principal)
    if payload.targetId is not None:
        return _routed(request, agent, payload, principal)
    if _wants_async(request, payload):
        run, replayed = run_submit(
            agent=agent,
            input=payload.input,
            actor=principal.actor,
            request_id=_request_id(request),
            idempotency_key=request.headers.get("Idempotency-Key", ""),
        )
        response = JsonResponse(compact({"runId": run.id, "sessionId": run.session_id}), status=202)
        response["Preference-Applied"] = "respond-async"
        response["Location"] = f"/v1/agents/runs/{run.id}"
        if replayed:
            response["Idempotent-Replayed"] = "true"
        return response
    request_id, key = _request_id(request), request.headers.get("Idempotency-Key", "")

    def work():  # run steps: the wait on the model is on the event loop when the handler serves this request
        # The caller waits for the whole answer: the gateway is asked not streamed (its usage; issue 53, decision 1533).
        run = yield from run_execute_steps(agent=agent, input=payload.input, actor=principal.actor, request_id=request_id,
                                           idempotency_key=key, listener=WholeAnswer())
        return _answer(run)

    return answer_later(org=principal.org_slug, work=work)


def _answer(run) -> JsonResponse:
    """The answer of a synchronous run: 200 `ok`, 502 failed, 202 waiting for approval; a replay says so."""
    if run.status == RunStatus.WAITING:  # the model asked for a tool needing approval (issue 28)
        response = _waiting_response(run)
    elif overflowed(run):  # the caller's input is over the model's window (issue 53)
        response = JsonResponse({**run_view(run), "code": str(ErrorCode.CONTEXT_LENGTH_EXCEEDED)}, status=400)
    else:
        response = JsonResponse(run_view(run), status=200 if run.status == RunStatus.OK else 502)
    if getattr(run, "replayed", False):
        response["Idempotent-Replayed"] = "true"
    return response


def _streamed(request, agent, payload: RunIn, principal):
    run = run_open(
        agent=agent,
        input=payload.input,
        actor=principal.actor,
        request_id=_request_id(request),
        idempotency_key=request.headers.get("Idempotency-Key", ""),
    )
    # The stream opens with `start` (run and session ids) and says them in headers too, as the chat
    # and OpenAI-compatible streams do: a client can watch or stop the run while it streams (issue 31).
    opening = {"runId": run.id, "sessionId": run.session_id or None}
    if run.replayed and overflowed(run):  # the 400 the first answer was (issue 53), again
        return run_headers(_answer(run), run)
    if run.replayed:  # the recorded run again, as the stream's final frame
        response = run_stream(org=principal.org_slug, work=lambda listener: at_once((ReplyFrame.RUN, run_view(run))), start=opening)
        response["Idempotent-Replayed"] = "true"
        return run_headers(response, run)

    def work(listener):
        done = yield from run_execute_opened_steps(run=run, agent=agent, listener=listener)
        if done.status == RunStatus.WAITING:  # the stream ends with the request to answer (issue 28)
            return ReplyFrame.APPROVAL, _with_approvals(done)
        if overflowed(done):  # the code the call without `stream` answers with its 400 (issue 53)
            return ReplyFrame.RUN, {**run_view(done), "code": str(ErrorCode.CONTEXT_LENGTH_EXCEEDED)}
        return ReplyFrame.RUN, run_view(done)

    def refuse(event, data):  # the overflow before the first frame: the 400 the call without `stream` answers (issue 53)
        if event == ReplyFrame.RUN and data.get("code") == ErrorCode.CONTEXT_LENGTH_EXCEEDED:
            return JsonResponse(data, status=400)
        return None

    return run_headers(run_stream(org=principal.org_slug, work=work, start=opening, refuse=refuse), run)


def _routed(request, agent, payload: RunIn, principal):
    run = routed_start(
        agent=agent, input=payload.input, target_id=payload.targetId, actor=principal.actor,
        request_id=_request_id(request), idempotency_key=request.headers.get("Idempotency-Key", ""),
    )
    status = 202 if run.status in RunStatus.HOLDS_FEE else 200 if run.status == RunStatus.OK else 502
    response = JsonResponse(run_view(run), status=status)
    if getattr(run, "replayed", False):
        response["Idempotent-Replayed"] = "true"
    return response


@router.get("/{ref}/runs", response=RunListOut, summary="One agent's run history", exclude_none=True)
def list_agent_runs(
    request,
    ref: str,
    status: word_param(RunStatus) = Query(None, description="Only runs in this status (default: finished runs, `ok` and `error`)."),
    limit: int = _run_limit(),
    cursor: str = cursor_param(),
):
    """Return one page of agent `ref`'s finished runs, newest first — or, with `status`, its runs in
    that status (`queued`, `running`, `waiting` as `GET /v1/agents/runs?status=` lists them);
    `nextCursor` reads the next page."""
    agent = selectors.agent_get(ref=ref)
    page = run_selectors.run_list_org(status=status, agent=agent, limit=limit, cursor=cursor)
    return {"runs": [run_view(r) for r in page.items], "nextCursor": page.next_cursor}
