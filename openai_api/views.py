"""The OpenAI-compatible routes under `/v1/agents/openai/v1/` (plain Django views, not Ninja).

* `GET  …/models` → `{"object": "list", "data": [model…]}`: the org's agents as models;
* `GET  …/models/{model}` → one `model` (404 `model_not_found`);
* `POST …/chat/completions` → a `chat.completion` (200), or with `"stream": true` a
  `text/event-stream` of `data: {chat.completion.chunk}` lines ending `data: [DONE]`.

Auth: an API key of the org (or a gateway JWT) as `Authorization: Bearer …`; anything else is
401. Every error is OpenAI's error object (`openai_api.errors`). The contract is OpenAI's chat
completions API; docs/guides/openai-compatible.md states what differs.
"""

from __future__ import annotations

import logging
import secrets
from functools import wraps

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agents.execution import WholeAnswer
from runs.streaming import QueueListener, answer_later, render_frame, run_stream
from agents_site.errors import ApiError, PayloadTooLarge
from agents_site.schemas import scan_caller_text
from agents_site.vocabulary import ChatRole, ErrorCode, ReplyFrame, RunStatus
from openai_api import selectors, services, wire
from openai_api.errors import InternalError, InvalidApiKey, error_answer, error_object, error_response, run_failure
from tenancy.authenticate import bearer_principal
from tenancy.principal import Principal

logger = logging.getLogger(__name__)

REQUEST_ID_MAX = 128


class MethodNotAllowed(ApiError):
    """405: the route exists without this method; `Allow` names the ones it serves."""

    status = 405
    code = ErrorCode.METHOD_NOT_ALLOWED

    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        super().__init__(f"{method} is not allowed here; use {', '.join(allowed)}")
        self.allowed = allowed

    def headers(self) -> dict[str, str]:
        """Return `{"Allow": …}`."""
        return {"Allow": ", ".join(self.allowed)}



def openai_view(*methods: str):
    """Decorate a view of this endpoint: CSRF-exempt (Bearer keys only), `methods` only (405),
    and every error — typed or not — answered as OpenAI's error object."""

    def decorate(view):
        @csrf_exempt
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            try:
                if request.method not in methods:
                    raise MethodNotAllowed(request.method, methods)
                return view(request, *args, **kwargs)
            except RequestDataTooBig:
                return error_response(PayloadTooLarge())
            except Exception as exc:
                return error_answer(exc, fault_log=f"unexpected error on {request.method} {request.path}")

        return wrapper

    return decorate


def principal_of(request) -> Principal:
    """Return the caller's principal: an API key or gateway JWT acting for an org; else raise 401
    `InvalidApiKey` (no credential, an unknown or revoked key, a console session login)."""
    return bearer_principal(request, face="the OpenAI-compatible endpoint", refused=InvalidApiKey)


def refuse_credentials_in_query(request) -> None:
    """Refuse (422 `secret_in_transcript`, OpenAI's error shape) a query string carrying a credential.

    The endpoint reads no query parameter, but a URL is what proxies, access logs and traces
    keep: a credential the caller wrote there is refused like one in the body, by the same
    scanner (`agents_site.schemas.scan_caller_text`; findings name `?<param>`).
    """
    if request.GET:
        scan_caller_text({f"?{name}": [name, *request.GET.getlist(name)] for name in request.GET})


def _request_id(request) -> str:
    given = (request.headers.get("X-Request-Id") or "").strip()
    return given[:REQUEST_ID_MAX] if given else "req_" + secrets.token_hex(12)


@openai_view("GET")
def models(request):
    """`GET …/models`: the agents this key may call, by name, as OpenAI `model` objects."""
    principal = principal_of(request)
    refuse_credentials_in_query(request)
    data = [wire.model_body(agent, owned_by=principal.org_slug) for agent in selectors.model_list(principal=principal)]
    return JsonResponse({"object": "list", "data": data})


@openai_view("GET")
def model(request, model: str):
    """`GET …/models/{model}`: one agent (name or id) as an OpenAI `model`; 404 `model_not_found`."""
    principal = principal_of(request)
    refuse_credentials_in_query(request)
    return JsonResponse(wire.model_body(selectors.model_get(principal=principal, ref=model), owned_by=principal.org_slug))


@openai_view("POST")
def chat_completions(request):
    """`POST …/chat/completions`: run the agent named as `model` on the caller's messages.

    200 `chat.completion` (or the event stream); 400 bad input, `context_length_exceeded`
    (the run failed: the prompt is over the model's window; with `run_id`) or `gateway_refused`
    (the gateway refused a field the caller sent; `param` names it, with `run_id`); 401 no key; 402 balance; 404
    `model_not_found`; 409 `agent_external`; 422 `secret_in_transcript`; 502 `run_failed`
    (with `run_id`); 503 no gateway. Headers `X-Agents-Run-Id` / `X-Agents-Session-Id` name
    the run and the session to watch.
    """
    principal = principal_of(request)
    refuse_credentials_in_query(request)
    completion = wire.completion_request(wire.parse_body(request.body))
    started = services.completion_start(principal=principal, request=completion, request_id=_request_id(request))
    headers = {"X-Agents-Run-Id": started.run.id, "X-Agents-Session-Id": started.run.session_id or ""}
    if completion.stream:
        response = _stream(started, include_usage=completion.include_usage, org=principal.org_slug, sent=completion.gateway_fields())
        for name, value in headers.items():
            response[name] = value
        return response

    def answer():  # run steps: the wait on the model is on the event loop when the handler serves this request
        run = yield from services.completion_steps(started, listener=WholeAnswer())  # the gateway asked not streamed: its usage
        if run.status != RunStatus.OK:
            raise run_failure(run, sent=completion.gateway_fields())
        return JsonResponse(wire.completion_body(run, model=started.model), headers=headers)

    return answer_later(org=principal.org_slug, work=answer, on_error=_error_answer)


def _error_answer(exc: Exception):
    """Render what a deferred completion raised as OpenAI's error object (as `openai_view` does)."""
    return error_answer(exc, fault_log="a completion failed unexpectedly")


def _stream(started: services.StartedCompletion, *, include_usage: bool, org: str, sent: dict[str, str]):
    """Answer the started completion as OpenAI chunks: the role chunk, a content chunk per
    delta, the caller's tool calls, the final chunk with its finish reason, the usage chunk
    (with `include_usage`), `[DONE]`. The headers wait for the first chunk of the reply (`run_stream`'s
    `refuse`): a run the gateway refused before it — a context overflow, a field it refused — is
    answered 400 as the call without `stream` is, nothing streamed. A run that fails otherwise, or
    after the stream began, sends an error chunk (`{"error": {…, "code", "run_id"}}`) and then `[DONE]`."""
    run = started.run
    created = int(run.created_at.timestamp())

    def chunk(**fields) -> str:
        return render_frame(None, wire.chunk_body(run_id=run.id, created=created, model=started.model, **fields))

    def frame(event, data) -> str | None:
        if event == ReplyFrame.START:
            return chunk(delta={"role": ChatRole.ASSISTANT, "content": ""})
        if event == ReplyFrame.DELTA:
            return chunk(delta={"content": data["text"]})
        if event == ReplyFrame.OPS:
            calls = [{"index": i, **call} for i, call in enumerate(wire.tool_calls(data["ops"]))]
            return chunk(delta={"tool_calls": calls})
        if event == ReplyFrame.RUN:
            finished = data
            if finished.status != RunStatus.OK:
                failed = run_failure(finished, sent=sent)
                return render_frame(None, error_object(failed)) + render_frame(None, "[DONE]")
            out = chunk(delta={}, finish=wire.finish_reason(finished))
            usage = wire.usage_body(finished)
            if include_usage and usage is not None:  # unknown usage is left out, never sent as zeros
                out += chunk(usage=usage)
            return out + render_frame(None, "[DONE]")
        if event == ReplyFrame.ERROR:  # the worker failed outside the run's own record
            return render_frame(None, error_object(InternalError(data.get("error") or None))) + render_frame(None, "[DONE]")
        return None  # server-side tool actions are in the run's session, not in OpenAI's wire format

    def work(listener: QueueListener):
        listener.put(ReplyFrame.START, None)
        return ReplyFrame.RUN, (yield from services.completion_steps(started, listener=listener))

    def refuse(event, data):  # a gateway's refusal before the first chunk: the 400 the call without `stream` answers (issue 53)
        if event == ReplyFrame.RUN and data.status != RunStatus.OK:
            failed = run_failure(data, sent=sent)
            if failed.status == 400:  # context_length_exceeded, gateway_refused; a 502 stays the stream's error chunk
                return error_response(failed)
        return None

    return run_stream(org=org, work=work, frame=frame, refuse=refuse)
