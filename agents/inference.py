"""The inference gateway: one `openai` SDK client per process, the served model catalog, and
one chat completion, streamed, with its failure classified.

Configured by `INFERENCE_BASE_URL`, `INFERENCE_API_KEY` and `INFERENCE_TIMEOUT_SECONDS`. The
SDK's own retries are off (`max_retries=0`): the run path applies the spec's retry policy
(`agents.execution.completion`) to the `UpstreamBusy` failures raised here.

Every completion is streamed from the gateway (`stream: true`, `stream_options.include_usage`):
one path whether or not the caller streams. The pieces of the reply go to `on_delta` as they
arrive; the reply, its tool calls (argument fragments joined by index) and the usage are
assembled into the SDK's `ChatCompletion`, the shape a non-streamed call returns. Every
completion asks for at most `AGENTS_MAX_OUTPUT_TOKENS` tokens (`max_tokens`), so no run writes
forever, whatever its agent sets.

A streamed answer is read to the end of its body after its `[DONE]`, on a drain thread
(`_FinishingStream`): the SDK stops at `[DONE]` and closes the response, which made the HTTP
pool drop the connection, so every completion opened a new one (a new TLS handshake to a real
gateway).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import httpx2
import openai
from django.conf import settings
from openai.types.chat import ChatCompletion

from toolkit.stopping import WatchedBackend

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_client: openai.OpenAI | None = None
_client_key: tuple | None = None
_catalog: tuple[float, str, frozenset[str] | None] | None = None

#: What is read after a stream's `[DONE]` to finish its body (its last chunk is a few bytes):
#: at most this many bytes and chunks; a gateway that sends more just has its connection closed.
DRAIN_LIMIT_BYTES = 64 * 1024
DRAIN_LIMIT_CHUNKS = 8
#: Bodies finished at once, off the run's thread; beyond that many waiting, a connection is closed instead.
DRAIN_THREADS = 2
DRAIN_MAX_WAITING = 32
_DONE_TAILS = (b"[DONE]\n\n", b"[DONE]\r\n\r\n", b"[DONE]\r\r")

_drains = ThreadPoolExecutor(max_workers=DRAIN_THREADS, thread_name_prefix="gateway-drain")
_drains_lock = threading.Lock()
_drains_waiting = 0


def drains_waiting() -> int:
    """Return how many finished streams are still having the rest of their body read (tests wait on 0)."""
    with _drains_lock:
        return _drains_waiting


class _FinishingStream(httpx2.SyncByteStream):
    """A response body that, closed right after an SSE `[DONE]`, has what is left of it read first.

    HTTP/1.1 can only reuse a connection whose response was read to its end; the SDK closes a
    stream as soon as it has parsed `[DONE]`, one chunk before the body's end. The rest is read
    on a drain thread (`DRAIN_THREADS`), never on the run's: a gateway that sends `[DONE]` and
    then neither ends the body nor closes the connection costs a drain thread its read timeout,
    not the run. Until the drain ends the connection stays out of the pool; a body that is not
    ended within `DRAIN_LIMIT_CHUNKS` chunks / `DRAIN_LIMIT_BYTES`, or fails, is closed (h11
    never hands back a connection whose response did not end cleanly). A stream closed before
    its `[DONE]` (the run's deadline, a broken or unreadable stream) is closed at once.
    """

    def __init__(self, inner: httpx2.SyncByteStream) -> None:
        self._inner = inner
        self._chunks = None
        self._tail = b""
        self._ended = False

    def __iter__(self):
        self._chunks = iter(self._inner)
        for chunk in self._chunks:
            self._tail = (self._tail + chunk)[-16:]
            yield chunk
        self._ended = True

    def close(self) -> None:
        global _drains_waiting
        if not self._ended and self._chunks is not None and self._tail.endswith(_DONE_TAILS):
            with _drains_lock:
                room = _drains_waiting < DRAIN_MAX_WAITING
                if room:
                    _drains_waiting += 1
            if room:
                try:
                    _drains.submit(self._drain)
                    return
                except RuntimeError:  # the executor is shut down (interpreter exit)
                    _drain_done()
        self._inner.close()

    def _drain(self) -> None:
        try:
            read = chunks = 0
            for chunk in self._chunks:
                read, chunks = read + len(chunk), chunks + 1
                if read > DRAIN_LIMIT_BYTES or chunks > DRAIN_LIMIT_CHUNKS:
                    break
        except Exception:  # the connection is closed below instead of reused
            logger.debug("gateway stream: the rest after [DONE] unreadable", exc_info=True)
        finally:
            try:
                self._inner.close()
            finally:
                _drain_done()


def _drain_done() -> None:
    global _drains_waiting
    with _drains_lock:
        _drains_waiting -= 1


class _KeepAliveTransport(httpx2.HTTPTransport):
    """The SDK's HTTP transport, with every `text/event-stream` body a `_FinishingStream`, and
    network streams a run's stop interrupts (`toolkit.stopping.WatchedBackend`, issue 25)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._pool._network_backend = WatchedBackend(self._pool._network_backend)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        return httpx2.Response(status_code=response.status_code, headers=response.headers,
                               stream=_FinishingStream(response.stream), extensions=response.extensions)


class _GatewayHttpClient(openai.DefaultHttpxClient):
    """The SDK's default HTTP client (its timeouts, limits, redirects, and the proxies of the
    environment: `HTTPS_PROXY`, `NO_PROXY`…) whose transports, direct and proxied, are
    `_KeepAliveTransport`s; closed when it is let go, as the SDK's own client is."""

    def _init_transport(self, *args, transport=None, **kwargs):
        return transport if transport is not None else _KeepAliveTransport(*args, **kwargs)

    def _init_proxy_transport(self, proxy, *args, **kwargs):
        return _KeepAliveTransport(*args, proxy=proxy, **kwargs)

    def __del__(self) -> None:
        try:
            if not self.is_closed:
                self.close()
        except Exception:
            pass


def inference_configured() -> bool:
    """Return True when `INFERENCE_BASE_URL` is set."""
    return bool(settings.INFERENCE_BASE_URL)


def get_client() -> openai.OpenAI | None:
    """Return the process's SDK client for the configured gateway, or None when unset."""
    global _client, _client_key
    if not inference_configured():
        return None
    key = (settings.INFERENCE_BASE_URL, settings.INFERENCE_API_KEY, settings.INFERENCE_TIMEOUT_SECONDS)
    with _lock:
        if _client is None or _client_key != key:
            _client = openai.OpenAI(
                base_url=settings.INFERENCE_BASE_URL,
                api_key=settings.INFERENCE_API_KEY or "not-needed",
                timeout=settings.INFERENCE_TIMEOUT_SECONDS,
                max_retries=0,
                http_client=_GatewayHttpClient(),
            )
            _client_key = key
        return _client


def model_catalog() -> frozenset[str] | None:
    """Return the model ids the gateway serves (`GET {base}/models`), cached for a TTL.

    Returns None when no gateway is configured, it cannot be reached or it lists nothing: the
    catalog check then fails open (reference §2.1 step 2). TTL: `AGENTS_MODEL_CATALOG_TTL_SECONDS`.
    """
    global _catalog
    client = get_client()
    if client is None:
        return None
    now = time.monotonic()
    base = settings.INFERENCE_BASE_URL
    cached = _catalog
    if cached and cached[1] == base and now - cached[0] < settings.AGENTS_MODEL_CATALOG_TTL_SECONDS:
        return cached[2]
    try:
        ids = frozenset(m.id for m in client.with_options(timeout=10).models.list())
    except openai.OpenAIError as exc:
        logger.warning("model catalog unavailable: %s", exc)
        ids = frozenset()
    result = ids or None
    _catalog = (now, base, result)
    return result


class UpstreamError(Exception):
    """A chat completion failed; `reason` is one sentence for the run's `error` field."""

    def __init__(self, reason: str, *, status: int | None = None, partial: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.partial = partial  # the reply's text received before the failure (raw; "" when none)


class UpstreamBusy(UpstreamError):
    """A transient failure the policy retries: 429, 5xx, a connection error or empty choices."""


class UpstreamRefused(UpstreamError):
    """A failure no retry can fix (a 4xx other than 429, an unreadable answer): fails at once."""


def _status_reason(exc: openai.APIStatusError) -> str:
    message = ""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message", "") if isinstance(inner, dict) else str(inner)
    message = (message or exc.message or "").strip()
    return f"upstream answered {exc.status_code}: {message}"[:500]


def output_token_cap(max_tokens: int | None) -> int:
    """Return the `max_tokens` a completion asks for: the agent's value capped by
    `AGENTS_MAX_OUTPUT_TOKENS`, or the cap when the agent sets none. Example: cap 4096, agent
    8000 → 4096; agent None → 4096; agent 256 → 256."""
    cap = max(int(settings.AGENTS_MAX_OUTPUT_TOKENS), 1)
    return cap if not max_tokens else max(min(int(max_tokens), cap), 1)


class _Assembly:
    """A streamed reply put back together: content, tool calls by index, usage, finish reason."""

    def __init__(self) -> None:
        self.id = ""
        self.model = ""
        self.created = 0
        self.content: list[str] = []
        self.saw_content = False
        self.calls: dict[int, dict] = {}
        self.finish: str | None = None
        self.usage = None
        self.choices = False

    def add(self, chunk, on_delta: Callable[[str], None] | None) -> None:
        self.id = self.id or (getattr(chunk, "id", "") or "")
        self.model = self.model or (getattr(chunk, "model", "") or "")
        self.created = self.created or (getattr(chunk, "created", 0) or 0)
        if getattr(chunk, "usage", None) is not None:
            self.usage = chunk.usage
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0):  # n > 1 is never asked for; only the first choice counts
                continue
            self.choices = True
            if choice.finish_reason:
                self.finish = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content is not None:
                self.saw_content = True
                if delta.content:
                    self.content.append(delta.content)
                    if on_delta is not None:
                        on_delta(delta.content)
            for fragment in delta.tool_calls or []:
                call = self.calls.setdefault(fragment.index or 0, {"id": "", "name": "", "arguments": []})
                if fragment.id:
                    call["id"] = call["id"] or fragment.id
                function = fragment.function
                if function is not None:
                    if function.name and function.name != call["name"]:
                        call["name"] += function.name
                    if function.arguments:
                        call["arguments"].append(function.arguments)

    @property
    def text(self) -> str:
        return "".join(self.content)

    def completion(self) -> ChatCompletion:
        """Return the assembled reply as a `ChatCompletion` (one choice)."""
        calls = [
            {"id": call["id"] or f"call_{index}", "type": "function", "function": {"name": call["name"], "arguments": "".join(call["arguments"])}}
            for index, call in sorted(self.calls.items())
        ]
        finish = self.finish if self.finish in _FINISH_REASONS else ("tool_calls" if calls else "stop")
        message: dict = {"role": "assistant", "content": self.text if (self.saw_content or not calls) else None}
        if calls:
            message["tool_calls"] = calls
        usage = None
        if self.usage is not None:
            usage = {"prompt_tokens": self.usage.prompt_tokens or 0, "completion_tokens": self.usage.completion_tokens or 0,
                     "total_tokens": self.usage.total_tokens or 0}
        return ChatCompletion.model_validate({
            "id": self.id or "chatcmpl-stream", "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "finish_reason": finish, "message": message}], "usage": usage,
        })


_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})


def chat_completion(
    *,
    model: str,
    messages: list[dict],
    tools: list[dict] | None = None,
    timeout: float | None = None,
    on_delta: Callable[[str], None] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
) -> ChatCompletion:
    """Stream one chat completion from the gateway; return it assembled as a `ChatCompletion` (1 choice).

    In: `model`, OpenAI-shaped `messages`, optional OpenAI `tools` definitions, an optional
    `timeout` in seconds for the whole completion (default `INFERENCE_TIMEOUT_SECONDS`; it also
    bounds each read), `on_delta(text)` called with each piece of the reply's content as it
    arrives (raw, unmasked; must not raise), and the generation settings: `max_tokens` (capped
    by `AGENTS_MAX_OUTPUT_TOKENS`, which is sent when it is None), `temperature`, `top_p` (sent
    only when set).
    Out: the SDK's `ChatCompletion`: `choices[0].message` with `content` (the pieces joined) and
    `tool_calls` (fragments joined by index), `usage` when the gateway reports it.
    Raises `UpstreamBusy` for 429, 5xx, connection errors, timeouts and a stream that breaks
    off (mid-stream failures carry the text received so far in `partial`), and for an answer
    with no choices; `UpstreamRefused` for any other status, an unreadable answer, or when no
    gateway is configured.
    """
    client = get_client()
    if client is None:
        raise UpstreamRefused("inference is not configured on this deployment")
    total = settings.INFERENCE_TIMEOUT_SECONDS if timeout is None else max(timeout, 0.001)
    if timeout is not None:
        client = client.with_options(timeout=max(timeout, 0.001))
    kwargs: dict = {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True},
                    "max_tokens": output_token_cap(max_tokens)}
    if tools:
        kwargs["tools"] = tools
    if temperature is not None:
        kwargs["temperature"] = temperature
    if top_p is not None:
        kwargs["top_p"] = top_p
    reply = _Assembly()
    started = time.monotonic()
    try:
        stream = client.chat.completions.create(**kwargs)
        try:
            for chunk in stream:
                reply.add(chunk, on_delta)
                if time.monotonic() - started > total:
                    raise UpstreamBusy("upstream timed out", partial=reply.text)
        finally:
            stream.close()
    except UpstreamError:
        raise
    except openai.APIStatusError as exc:
        if exc.status_code == 429 or exc.status_code >= 500:
            raise UpstreamBusy(_status_reason(exc), status=exc.status_code, partial=reply.text) from exc
        raise UpstreamRefused(_status_reason(exc), status=exc.status_code, partial=reply.text) from exc
    except (openai.APITimeoutError, httpx.TimeoutException) as exc:
        raise UpstreamBusy("upstream timed out", partial=reply.text) from exc
    except (openai.APIConnectionError, httpx.TransportError) as exc:
        cause = exc.__cause__ or exc
        reason = "upstream stream broke off" if reply.choices else "upstream unreachable"
        raise UpstreamBusy(f"{reason}: {cause}"[:500], partial=reply.text) from exc
    except openai.APIError as exc:  # an error frame inside the stream (the gateway failed while answering)
        raise UpstreamBusy(f"upstream failed while streaming: {exc.message}"[:500], partial=reply.text) from exc
    except (openai.OpenAIError, ValueError) as exc:  # ValueError: a chunk that is not JSON
        raise UpstreamRefused(f"upstream answer unreadable: {exc}"[:500], partial=reply.text) from exc
    if not reply.choices:
        raise UpstreamBusy("upstream answered with no choices")
    try:
        return reply.completion()
    except ValueError as exc:  # pydantic's ValidationError: a tool call or usage of the wrong shape
        raise UpstreamRefused(f"upstream answer unreadable: {exc}"[:500], partial=reply.text) from exc


def reset_caches() -> None:
    """Forget the cached client and catalog (tests and settings changes)."""
    global _client, _client_key, _catalog
    with _lock:
        _client = None
        _client_key = None
        _catalog = None
