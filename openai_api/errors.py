"""Errors of the OpenAI-compatible endpoint, rendered as OpenAI's error object.

This path is the second deliberate exception to the one error shape (docs/decisions/0049-the-openai-compatible-endpoint-answers-openais-error-object.md): a client written for OpenAI (its SDKs, LangChain, editors) reads
`{"error": {"message", "type", "param", "code"}}`, so that is what every error here answers.
`code` is this platform's `ErrorCode` word (`model_not_found`, `secret_in_transcript`,
`insufficient_balance`, …), `type` OpenAI's class of error for the status
(`OpenAIErrorType`), `param` the request field at fault (or null), and the error's named
extras sit beside them (`run_id` of a failed run, `findings` of a refused credential).
Services still raise the typed `ApiError`s; only the rendering differs.
"""

from __future__ import annotations

import json
import logging
import re

from django.http import HttpResponse

from agents.inference import refused_param
from agents_site import errors
from agents_site.errors import ApiError, InvalidRequest, NotFound
from agents_site.vocabulary import ErrorCode, OpenAIErrorType
from tenancy.faults import store_fault

logger = logging.getLogger(__name__)


class InternalError(errors.InternalError):
    """500: an unexpected fault; nothing was half-written (the run, if any, is recorded by its lifecycle)."""

    default_message = "internal error"


class InvalidParam(InvalidRequest):
    """400: one request field is wrong; `param` names it (`messages[2].role`, `tools[0]`, `stream`)."""

    def __init__(self, message: str, *, param: str | None) -> None:
        super().__init__(message)
        self.param = param


class ApprovalUnsupported(InvalidParam):
    """400: the agent asks a person to approve some tool calls; a chat completion cannot wait for that."""

    code = ErrorCode.APPROVAL_UNSUPPORTED

    def __init__(self, model: str) -> None:
        super().__init__(f"The model '{model[:128]}' asks a person to approve some of its tool calls (approval rules), which a "
                         "chat completion cannot wait for; run it with POST /v1/agents/{ref}/run instead.", param="model")


class InvalidApiKey(ApiError):
    """401: no API key, or an unknown, revoked or otherwise refused one."""

    status = 401
    code = ErrorCode.INVALID_API_KEY
    default_message = "send an API key of your org as 'Authorization: Bearer ak_…'"


class ModelNotFound(NotFound):
    """404: no agent of that name or id in the org that this key may use (another org's is the same 404)."""

    code = ErrorCode.MODEL_NOT_FOUND

    def __init__(self, model: str) -> None:
        super().__init__(f"The model '{model[:128]}' does not exist or you do not have access to it.")
        self.param = "model"


class RunFailed(ApiError):
    """502: the call's run ended `error`; `run_id` names the recorded run, the message is its error."""

    status = 502
    code = ErrorCode.RUN_FAILED
    default_message = "the run failed"

    def __init__(self, message: str, *, run_id: str, session_id: str = "") -> None:
        super().__init__(message or self.default_message, run_id=run_id, session_id=session_id)


class ContextLengthExceeded(ApiError):
    """400: the call's run failed because the prompt is over the model's context window (the
    gateway said so); OpenAI's own code for it, so clients (LangChain, editors) recognise it.
    The run is recorded `error` (`run_id`); the next call with fewer or shorter messages works,
    and the platform trims a call's oldest turns to the window it learned."""

    status = 400
    code = ErrorCode.CONTEXT_LENGTH_EXCEEDED

    def __init__(self, message: str, *, run_id: str, session_id: str = "") -> None:
        super().__init__(message, run_id=run_id, session_id=session_id)
        self.param = "messages"


class GatewayRefused(ApiError):
    """400 `gateway_refused`: the gateway refused a field the caller sent and this endpoint passed on
    unchanged (`response_format` a llama-cpp-python server cannot honour, a `tool_choice` a
    LiteLLM route refuses…); `param` names the caller's field. The run is recorded `error`
    (`run_id`); it was asked once, not retried, and no failover model was tried."""

    status = 400
    code = ErrorCode.GATEWAY_REFUSED

    def __init__(self, message: str, *, param: str, run_id: str, session_id: str = "") -> None:
        super().__init__(message, run_id=run_id, session_id=session_id)
        self.param = param


def run_failure(run, *, sent: dict[str, str] | None = None) -> ApiError:
    """Return the error a failed run of this endpoint answers.

    In: the failed run; `sent`, the request fields the caller set that reached the gateway unchanged,
    as `{name at the gateway: name the caller used}` (`CompletionRequest.gateway_fields`).
    Out: `ContextLengthExceeded` (400) when its error is a context overflow (it starts with
    `context_length_exceeded`); `GatewayRefused` (400, `param` the caller's field) when the gateway
    refused one of the `sent` fields (`agents.inference.refused_param` reads the error); else
    `RunFailed` (502).
    """
    error = run.error or ""
    if error.startswith(str(ErrorCode.CONTEXT_LENGTH_EXCEEDED)):
        return ContextLengthExceeded(error, run_id=run.id, session_id=run.session_id or "")
    param = _refused_field(error, sent or {})
    if param:
        return GatewayRefused(f"the model's gateway refused '{param}': {error}", param=param, run_id=run.id,
                              session_id=run.session_id or "")
    return RunFailed(error, run_id=run.id, session_id=run.session_id or "")


_REFUSAL_4XX = re.compile(r"^upstream answered 4(?!29)\d\d: ")


def _refused_field(error: str, sent: dict[str, str]) -> str:
    """Return the caller's field a gateway's refusal (`error`, the run's) names, or "".

    The field the refusal names (`refused_param`: an error object's `param`, a validation
    error's location) when its first part is one of `sent`; else, for a 4xx (not 429), the first
    of `sent` its message mentions: quoted (`'stop'`), or a compound name as a word (`top_p`,
    vLLM's "tool choice")."""
    if not sent:
        return ""
    refused = refused_param(error)
    if refused is not None:
        field = refused[1]
        top = re.split(r"[.\[]", field, maxsplit=1)[0]
        if top in sent:
            return sent[top] + field[len(top):]
    if _REFUSAL_4XX.match(error):
        for name, caller_name in sent.items():
            quoted = rf"""['"`]{re.escape(name)}['"`]"""
            # A bare word only for a compound name: `user` or `stop` in a sentence is no field.
            bare = rf"(?<![A-Za-z0-9_]){re.escape(name).replace('_', '[_ ]')}(?![A-Za-z0-9_])" if "_" in name else None
            if re.search(quoted, error) or (bare and re.search(bare, error, re.IGNORECASE)):
                return caller_name
    return ""


def error_type(status: int) -> OpenAIErrorType:
    """Return OpenAI's error `type` for an HTTP status (401 → `authentication_error`, 5xx → `api_error`, …)."""
    if status == 401:
        return OpenAIErrorType.AUTHENTICATION
    if status == 402:
        return OpenAIErrorType.INSUFFICIENT_QUOTA
    if status == 403:
        return OpenAIErrorType.PERMISSION
    if status == 429:
        return OpenAIErrorType.RATE_LIMIT
    if status >= 500:
        return OpenAIErrorType.API
    return OpenAIErrorType.INVALID_REQUEST


def error_object(error: ApiError) -> dict:
    """Return `{"error": {"message", "type", "param", "code", …extras}}` for `error`.

    Example: `ModelNotFound("nope")` → `{"error": {"message": "The model 'nope' does not exist
    or you do not have access to it.", "type": "invalid_request_error", "param": "model",
    "code": "model_not_found"}}`.
    """
    return {
        "error": {
            "message": error.message,
            "type": str(error_type(error.status)),
            "param": getattr(error, "param", None),
            "code": str(error.code),
            **error.extras,
        }
    }


def stream_error_event(error: ApiError) -> dict:
    """Return the Responses API's streamed `error` event for `error`: `{"type": "error", "sequence_number": -1,
    "code", "message", "param": None}` (its `code` and `message` those of `error_object`)."""
    failure = error_object(error)["error"]
    return {"type": "error", "sequence_number": -1, "code": failure["code"], "message": failure["message"], "param": None}


def error_answer(exc: Exception, *, fault_log: str) -> HttpResponse:
    """Render anything an OpenAI-compatible view (chat completions, Responses) raised as OpenAI's error object.

    An `ApiError` as itself; a store's overload or refusal as its 503 (`tenancy.faults`); anything
    else, logged with its traceback under `fault_log`, as 500 `internal_error` "internal error".
    """
    if isinstance(exc, ApiError):
        return error_response(exc)
    fault = store_fault(exc)
    if fault is not None:
        return error_response(fault)
    logger.error(fault_log, exc_info=exc)
    return error_response(InternalError())


def error_response(error: ApiError) -> HttpResponse:
    """Render `error` as OpenAI's error object with its HTTP status and headers."""
    body = json.dumps(error_object(error), ensure_ascii=False)
    response = HttpResponse(body, status=error.status, content_type="application/json")
    for name, value in error.headers().items():
        response[name] = value
    if error.status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="agents"'
    return response
