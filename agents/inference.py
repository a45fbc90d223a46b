"""The inference gateway: one `openai` SDK client per process, the served model catalog, and
one chat completion, streamed, with its failure classified.

Configured by `INFERENCE_BASE_URL`, `INFERENCE_API_KEY` and the timeouts (issue 31):
`INFERENCE_CONNECT_TIMEOUT_SECONDS` to connect, `INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS` until the
first piece of the reply (a CPU model reads the prompt first), `INFERENCE_TOKEN_TIMEOUT_SECONDS`
between two pieces, all within the caller's deadline (`timeout`; the run's
`AGENTS_RUN_DEADLINE_SECONDS`) and, when the deprecated `INFERENCE_TIMEOUT_SECONDS` is set (the
one timeout of earlier versions), within that many seconds per completion. A `_Watchdog` ends a
stream that goes quiet for longer. The SDK's own retries are off (`max_retries=0`): the run
path applies the spec's retry policy (`agents.execution.completion`) to the `UpstreamBusy`
failures raised here.

Every completion is streamed from the gateway (`stream: true`, `stream_options.include_usage`):
one path whether or not the caller streams. The pieces of the reply go to `on_delta` as they
arrive; the reply, its tool calls (argument fragments joined by index) and the usage are
assembled into the SDK's `ChatCompletion`, the shape a non-streamed call returns. Every
completion asks for at most `AGENTS_MAX_OUTPUT_TOKENS` tokens (`max_tokens`; the agent's
`maxTokens`, else `AGENTS_DEFAULT_OUTPUT_TOKENS`), so no run writes forever. Every request
carries the run's id as the `X-Agents-Run-Id` header (issue 32), and with
`AGENTS_GATEWAY_RUN_METADATA` also in the body as `metadata` (`agents_run_id`, and the tag
`agents_run:<id>` LiteLLM keeps in its spend logs).

A streamed answer is read to the end of its body after its `[DONE]`, on a drain thread
(`_FinishingStream`): the SDK stops at `[DONE]` and closes the response, which made the HTTP
pool drop the connection, so every completion opened a new one (a new TLS handshake to a real
gateway).

`chat_completion_async` is the same completion awaited on an event loop (issue 26: waiting costs
no thread): it shares the request (`_request`), the assembly, the failure classification
(`_failure`) and the quiet limits (`_Clock`, awaited as asyncio timeouts instead of a watchdog
thread) with `chat_completion`; its client is the loop's own `AsyncOpenAI`
(`get_async_client`) and its body is finished after `[DONE]` by a task, not a thread
(`_FinishingAsyncStream`). It touches no database.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import httpx2
import openai
from django.conf import settings
from openai.types.chat import ChatCompletion

from agents_site.vocabulary import ChatRole
from tenancy import stores
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


#: The async path's drains are tasks on the event loop, not threads: more may wait at once; each
#: gives up after `DRAIN_LIMIT_SECONDS` whatever the gateway does.
DRAIN_MAX_WAITING_ASYNC = 1024
DRAIN_LIMIT_SECONDS = 10.0
_async_drains_waiting = 0
_async_drain_tasks: set[asyncio.Task] = set()  # strong references: a task nothing holds may be collected mid-read


def drains_waiting() -> int:
    """Return how many finished streams (threads' and event loops') are still having the rest of
    their body read (tests wait on 0)."""
    with _drains_lock:
        return _drains_waiting + _async_drains_waiting


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


class _FinishingAsyncStream(httpx2.AsyncByteStream):
    """The async path's `_FinishingStream`: a response body that, closed right after an SSE
    `[DONE]`, has what is left of it read by a background task on the event loop (no thread),
    so the connection goes back to the pool. The task reads at most `DRAIN_LIMIT_CHUNKS` chunks /
    `DRAIN_LIMIT_BYTES` within `DRAIN_LIMIT_SECONDS`, then closes the body (a body that did not
    end is closed with its connection). The SDK's own inline drain after `[DONE]` (a second
    iteration of the body) reads nothing here: the run's task does not wait for the body's end.
    A stream closed before its `[DONE]` is closed at once.
    """

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._chunks = None
        self._tail = b""
        self._ended = False
        self._closed = False

    async def __aiter__(self):
        if self._chunks is None:
            self._chunks = self._inner.__aiter__()
        elif self._tail.endswith(_DONE_TAILS):
            return  # the SDK's drain after [DONE]: left to the background task at close
        async for chunk in self._chunks:
            self._tail = (self._tail + chunk)[-16:]
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        global _async_drains_waiting
        if self._closed:
            return
        self._closed = True
        if not self._ended and self._chunks is not None and self._tail.endswith(_DONE_TAILS):
            with _drains_lock:
                room = _async_drains_waiting < DRAIN_MAX_WAITING_ASYNC
                if room:
                    _async_drains_waiting += 1
            if room:
                task = asyncio.get_running_loop().create_task(self._drain(), name="gateway-drain")
                _async_drain_tasks.add(task)
                task.add_done_callback(_async_drain_tasks.discard)
                return
        await self._inner.aclose()

    async def _drain(self) -> None:
        global _async_drains_waiting
        try:
            read = chunks = 0
            async with asyncio.timeout(DRAIN_LIMIT_SECONDS):
                async for chunk in self._chunks:
                    read, chunks = read + len(chunk), chunks + 1
                    if read > DRAIN_LIMIT_BYTES or chunks > DRAIN_LIMIT_CHUNKS:
                        break
        except Exception:  # the connection is closed below instead of reused
            logger.debug("gateway stream: the rest after [DONE] unreadable", exc_info=True)
        finally:
            try:
                await self._inner.aclose()
            finally:
                with _drains_lock:
                    _async_drains_waiting -= 1


class _KeepAliveAsyncTransport(httpx2.AsyncHTTPTransport):
    """The SDK's async HTTP transport, with every `text/event-stream` body a `_FinishingAsyncStream`.
    (A stop needs no watched backend here: it cancels the task awaiting the stream.)"""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        return httpx2.Response(status_code=response.status_code, headers=response.headers,
                               stream=_FinishingAsyncStream(response.stream), extensions=response.extensions)


class _GatewayAsyncHttpClient(openai.DefaultAsyncHttpxClient):
    """The SDK's default async HTTP client (its timeouts, limits, redirects, and the proxies of the
    environment) whose transports, direct and proxied, are `_KeepAliveAsyncTransport`s."""

    def _init_transport(self, *args, transport=None, **kwargs):
        return transport if transport is not None else _KeepAliveAsyncTransport(*args, **kwargs)

    def _init_proxy_transport(self, proxy, *args, **kwargs):
        return _KeepAliveAsyncTransport(*args, proxy=proxy, **kwargs)


def gateway_limits() -> httpx2.Limits:
    """Return the gateway clients' connection limits: the SDK's 1,000 connections at once, and at
    most `AGENTS_GATEWAY_KEEPALIVE_CONNECTIONS` (20) kept open idle for the next completion.

    The SDK keeps 100: after a burst of 500 completions a process held 100 idle sockets to the
    gateway for good (the pool closes an expired one only when it is next used; issue 26).
    """
    keep = max(0, int(getattr(settings, "AGENTS_GATEWAY_KEEPALIVE_CONNECTIONS", 20)))
    return httpx2.Limits(max_connections=1000, max_keepalive_connections=keep)


def inference_configured() -> bool:
    """Return True when `INFERENCE_BASE_URL` is set."""
    return bool(settings.INFERENCE_BASE_URL)


def get_client() -> openai.OpenAI | None:
    """Return the process's SDK client for the configured gateway, or None when unset."""
    global _client, _client_key
    if not inference_configured():
        return None
    key = (settings.INFERENCE_BASE_URL, settings.INFERENCE_API_KEY)
    with _lock:
        if _client is None or _client_key != key:
            _client = openai.OpenAI(
                base_url=settings.INFERENCE_BASE_URL,
                api_key=settings.INFERENCE_API_KEY or "not-needed",
                timeout=gateway_timeout(None),
                max_retries=0,
                http_client=_GatewayHttpClient(limits=gateway_limits()),
            )
            _client_key = key
        return _client


#: The async clients, one per event loop: id(loop) → (weak reference to the loop, config key, client).
#: An entry whose loop was collected or closed is dropped at the next lookup (its connections
#: belong to a loop that no longer runs).
_async_clients: dict[int, tuple[weakref.ref, tuple, openai.AsyncOpenAI]] = {}
_retired_closes: set[asyncio.Task] = set()


def get_async_client() -> openai.AsyncOpenAI | None:
    """Return the running event loop's async SDK client for the configured gateway, or None when unset.

    One client per event loop (its connections are that loop's), rebuilt when
    `INFERENCE_BASE_URL` or `INFERENCE_API_KEY` changes (the old one is closed on the loop),
    with the SDK's retries off (`max_retries=0`). Clients of loops that closed are forgotten
    here. Must be called from a coroutine (raises `RuntimeError` with no running loop).
    """
    if not inference_configured():
        return None
    loop = asyncio.get_running_loop()
    key = (settings.INFERENCE_BASE_URL, settings.INFERENCE_API_KEY)
    retired = None
    with _lock:
        for ident, (ref, _, _) in list(_async_clients.items()):
            other = ref()
            if other is None or other.is_closed():
                del _async_clients[ident]
        entry = _async_clients.get(id(loop))
        if entry is not None and entry[0]() is loop:
            if entry[1] == key:
                return entry[2]
            retired = entry[2]
        client = openai.AsyncOpenAI(
            base_url=settings.INFERENCE_BASE_URL,
            api_key=settings.INFERENCE_API_KEY or "not-needed",
            timeout=gateway_timeout(None),
            max_retries=0,
            http_client=_GatewayAsyncHttpClient(limits=gateway_limits()),
        )
        _async_clients[id(loop)] = (weakref.ref(loop), key, client)
    if retired is not None:
        task = loop.create_task(retired.close())
        _retired_closes.add(task)
        task.add_done_callback(_retired_closes.discard)
    return client


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
    windows: dict[str, int] = {}
    try:
        listed = list(client.with_options(timeout=10).models.list())
        ids = frozenset(m.id for m in listed)
        for m in listed:
            window = _listed_window(m.model_dump() if hasattr(m, "model_dump") else {})
            if window:
                windows[m.id] = window
    except openai.OpenAIError as exc:
        logger.warning("model catalog unavailable: %s", exc)
        ids = frozenset()
    result = ids or None
    _catalog = (now, base, result)
    with _lock:
        _listed_windows.clear()
        _listed_windows.update(windows)
    return result


# -- what fits in a model's context (issue 31 item 2) ---------------------------------------------

_listed_windows: dict[str, int] = {}  # model → context window the gateway's model list says
_learned_windows: dict[tuple[str, str], int] = {}  # (base, model) → the window an overflow answer named
_ratios: dict[tuple[str, str], float] = {}  # (base, model) → prompt tokens per byte, from earlier usage
_tokenizer: dict[str, tuple[float, str | None]] = {}  # base → (checked at, the tokenize route that works, None: none)
_counts: dict[tuple[str, str, int], int] = {}  # (base, model, hash of text) → tokens
COUNT_CACHE_SIZE = 4096
TOKENIZE_TIMEOUT_SECONDS = 5.0


def _listed_window(entry: dict) -> int | None:
    """Return the context window a model list entry states: vLLM `max_model_len`, others'
    `context_length` / `context_window`, llama.cpp's `meta.n_ctx` (not `n_ctx_train`: the
    server's own `--ctx-size` may be smaller than what the model was trained with)."""
    for key in ("max_model_len", "context_length", "context_window"):
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    meta = entry.get("meta")
    value = meta.get("n_ctx") if isinstance(meta, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def context_window(model: str) -> int | None:
    """Return what the gateway says of `model`'s context window (tokens), or None when it says
    nothing: the window an overflow answer named (the truth of this server), else its model list's."""
    learned = _learned_windows.get((settings.INFERENCE_BASE_URL, model))
    if learned:
        return learned
    if model not in _listed_windows and inference_configured():
        model_catalog()
    return _listed_windows.get(model)


def note_window(model: str, window: int) -> None:
    """Remember the context window an overflow answer of the gateway named for `model`."""
    if window > 0:
        _learned_windows[(settings.INFERENCE_BASE_URL, model)] = window


def note_usage(model: str, prompt_bytes: int, prompt_tokens: int | None) -> None:
    """Calibrate the token estimate of `model` from a completion's `usage.prompt_tokens` and the
    bytes of the prompt it was sent (messages and tool definitions as JSON)."""
    if prompt_tokens and prompt_bytes > 0:
        _ratios[(settings.INFERENCE_BASE_URL, model)] = prompt_tokens / prompt_bytes


def _root(base: str) -> str:
    base = base.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


#: The tokenize routes tried, in order: llama.cpp's server and vLLM (`POST /tokenize`, answering
#: `tokens` or `count`), then llama-cpp-python's (`POST /extras/tokenize/count` → `count`).
TOKENIZE_ROUTES = ("/tokenize", "/extras/tokenize/count")


def _tokenize(client, base: str, route: str, model: str, text: str) -> int | None:
    body = {"model": model, "content": text, "prompt": text, "input": text, "add_special": False}
    headers = {"Authorization": f"Bearer {settings.INFERENCE_API_KEY}"} if settings.INFERENCE_API_KEY else {}
    response = client._client.post(_root(base) + route, json=body, headers=headers, timeout=TOKENIZE_TIMEOUT_SECONDS)
    if response.status_code != 200:
        return None
    data = response.json()
    if isinstance(data.get("count"), int):
        return data["count"]
    tokens = data.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def count_tokens(model: str, texts: list[str]) -> tuple[list[int], str]:
    """Return the token count of each text and how it was counted: `tokenizer` (the gateway's own
    tokenize route: llama.cpp, vLLM, llama-cpp-python), `calibrated` (bytes × the tokens per byte
    of earlier answers' `usage.prompt_tokens`), or `estimate` (characters ÷ 3). Counts by the
    tokenizer are cached; a gateway without a tokenize route is asked again after
    `AGENTS_MODEL_CATALOG_TTL_SECONDS`. No tokenizer is ever downloaded."""
    base = settings.INFERENCE_BASE_URL
    client = get_client()
    now = time.monotonic()
    known = _tokenizer.get(base)
    if client is not None and (known is None or (known[1] is None and now - known[0] > settings.AGENTS_MODEL_CATALOG_TTL_SECONDS)):
        route = None
        for candidate in TOKENIZE_ROUTES:
            try:
                if _tokenize(client, base, candidate, model, "hello") is not None:
                    route = candidate
                    break
            except Exception:  # not this gateway's route (or unreachable): the next, then the estimate
                continue
        _tokenizer[base] = known = (now, route)
    if client is not None and known and known[1]:
        counts = []
        try:
            for text in texts:
                key = (base, model, hash(text))
                if key not in _counts:
                    if len(_counts) >= COUNT_CACHE_SIZE:
                        _counts.clear()
                    counted = _tokenize(client, base, known[1], model, text)
                    if counted is None:
                        raise ValueError("tokenize answered without a count")
                    _counts[key] = counted
                counts.append(_counts[key])
            return counts, "tokenizer"
        except Exception:
            logger.info("gateway tokenize failed; estimating instead", exc_info=True)
    ratio = _ratios.get((base, model))
    if ratio:
        return [max(1, math.ceil(len(text.encode()) * ratio)) for text in texts], "calibrated"
    return [math.ceil(len(text) / 3) for text in texts], "estimate"


class UpstreamError(Exception):
    """A chat completion failed; `reason` is one sentence for the run's `error` field."""

    def __init__(self, reason: str, *, status: int | None = None, partial: str = "", code: str = "", param: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.partial = partial  # the reply's text received before the failure (raw; "" when none)
        self.code = code  # the gateway's own error code when it named one (`context_length_exceeded`…), else ""
        self.param = param  # the request field the gateway named as wrong (`response_format.type`), else ""


class UpstreamBusy(UpstreamError):
    """A transient failure the policy retries: 429, a 5xx that is not a refusal, a connection
    error, a timeout or empty choices."""


class UpstreamRefused(UpstreamError):
    """A failure no retry can fix: fails at once. A 4xx other than 429; a 5xx whose body says the
    request itself is wrong (an OpenAI-shaped `invalid_request_error`, a validation error: what
    llama-cpp-python answers with 500); an unreadable answer."""


class ContextOverflow(UpstreamRefused):
    """The prompt does not fit the model's context window (`code` = `context_length_exceeded`;
    `window`, the window the gateway named, else None)."""

    window: int | None = None


#: Words in a gateway's error message that say the prompt is over the model's context window:
#: OpenAI / vLLM ("maximum context length"), llama-cpp-python ("exceed context window"),
#: llama.cpp's server ("exceeds the available context size", `exceed_context_size_error`),
#: LiteLLM (`ContextWindowExceededError`).
_OVERFLOW = re.compile(r"context[ _-]?length[ _-]?exceeded|maximum context length|exceeds? (the )?context window|"
                       r"exceeds? the available context size|exceed_context_size|ContextWindowExceeded|context window of \d+",
                       re.IGNORECASE)
#: A validation failure of the request (pydantic / FastAPI): deterministic, whatever the status.
_VALIDATION = re.compile(r"validation error|'loc':|\"loc\":|Input should be|Field required|Extra inputs are not permitted",
                         re.IGNORECASE)
_PYDANTIC_ERROR = re.compile(r"""['"]loc['"]:\s*(?:\(([^)]*)\)|\[([^\]]*)\]),\s*['"]msg['"]:\s*(?:'([^']*)'|"([^"]*)")""")
_OVERFLOW_NUMBERS = (re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)"),
                     re.compile(r"maximum context length is (\d+) tokens.*?(?:requested|resulted in) (\d+) tokens", re.S))


def _error_fields(body) -> tuple[str, str, str]:
    """Return the (message, type, code) a gateway's error body carries ("" where absent).

    Shapes read: OpenAI `{"error": {"message", "type", "code"}}`, llama.cpp's server (the same,
    `code` an integer), vLLM's `{"object": "error", "message", "type", "param", "code"}`,
    FastAPI `{"detail": "…" | [{"loc", "msg"}…]}`, a bare `{"message"}`.
    """
    if not isinstance(body, dict):
        return (str(body) if body else "", "", "")
    inner = body.get("error", body)
    if isinstance(inner, str):
        return inner, "", ""
    if not isinstance(inner, dict):
        return "", "", ""
    detail = inner.get("detail")
    message = inner.get("message") or ""
    if not message and isinstance(detail, list):
        message = repr(detail)  # read below like pydantic's own dump
    elif not message and detail:
        message = str(detail)
    kind = inner.get("type") or ""
    code = inner.get("code")
    return str(message), str(kind) if kind else "", "" if code is None else str(code)


_UNION_TAG = re.compile(r"[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*")  # a class name (fields are snake_case)


def _validation_where(message: str) -> tuple[str, str, int]:
    """Return `(field, msg, more)` of a validation dump: the first error's field path (dotted, "" when
    none), its message, and how many more errors follow; `("", "", 0)` when nothing is readable."""
    found = _PYDANTIC_ERROR.findall(message)
    if not found:
        return "", "", 0
    tuple_loc, list_loc, quoted, double = found[0]
    loc, msg = tuple_loc or list_loc, quoted or double
    # pydantic names the union member it tried in the location (`typed_dict`, or the class, e.g.
    # llama-cpp-python 0.3.36's `ChatCompletionRequestSystemMessage`): not a field the caller sent.
    parts = [p.strip(" '\"") for p in loc.split(",") if p.strip(" '\"") and p.strip(" '\"") not in ("body", "typed_dict")
             and not _UNION_TAG.fullmatch(p.strip(" '\""))]
    return ".".join(parts), msg, len(found) - 1


def _validation_sentence(message: str) -> str:
    """Return a validation dump as one sentence: the first error's field and message, and how many more."""
    where, msg, more = _validation_where(message)
    if not msg:
        return _one_line(message)
    tail = f" (and {more} more validation error{'s' if more != 1 else ''})" if more else ""
    return f"{where}: {msg}{tail}" if where else f"{msg}{tail}"


def _named_param(body, message: str) -> str:
    """Return the request field a gateway's refusal names: its error object's `param` (OpenAI,
    vLLM, LiteLLM), else the first validation error's location (pydantic / FastAPI: llama-cpp-python,
    vLLM), else ""."""
    inner = body.get("error", body) if isinstance(body, dict) else None
    param = inner.get("param") if isinstance(inner, dict) else None
    if isinstance(param, str) and param.strip():
        return param.strip()[:200]
    return _validation_where(message)[0][:200]


def _one_line(message: str, limit: int = 240) -> str:
    text = " ".join((message or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _named_window(message: str, body) -> int | None:
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("n_ctx"), int):  # llama.cpp's server
        return inner["n_ctx"]
    for index, pattern in enumerate(_OVERFLOW_NUMBERS):
        match = pattern.search(message or "")
        if match:
            return int(match.group(2) if index == 0 else match.group(1))
    return None


def overflow_reason(message: str) -> str:
    """Return the sentence of a context overflow, with the token counts when the message has them."""
    for pattern in _OVERFLOW_NUMBERS:
        match = pattern.search(message or "")
        if match:
            a, b = int(match.group(1)), int(match.group(2))
            asked, window = (a, b) if pattern is _OVERFLOW_NUMBERS[0] else (b, a)
            return (f"context_length_exceeded: the prompt ({asked} tokens) is over the model's context window of {window} tokens; "
                    "shorten the conversation or raise the agent's contextWindow to the server's")
    return ("context_length_exceeded: the prompt is over the model's context window "
            f"(the gateway said: {_one_line(message, 160)})")


def classify_status(status: int, body, fallback: str = "", *, partial: str = "") -> UpstreamError:
    """Return the failure an error answer of the gateway is, with its reason in one sentence.

    In: the HTTP status, the parsed error body (dict, or text), the SDK's message as a fallback.
    Out: `ContextOverflow` when the message says the prompt is over the context window
    (whatever the status); `UpstreamRefused` for a 4xx other than 429 and for a 5xx whose
    body is an `invalid_request_error` or a validation failure (a retry sends the same request);
    `UpstreamBusy` otherwise (429, any other 5xx).
    """
    message, kind, code = _error_fields(body)
    message = message or fallback or ""
    if code == "context_length_exceeded" or kind == "exceed_context_size_error" or _OVERFLOW.search(message):
        overflow = ContextOverflow(overflow_reason(message), status=status, partial=partial, code="context_length_exceeded")
        overflow.window = _named_window(message, body)
        return overflow
    validation = bool(_VALIDATION.search(message))
    sentence = _validation_sentence(message) if validation else _one_line(message)
    if status == 429 or (status >= 500 and kind != "invalid_request_error" and not validation):
        return UpstreamBusy(f"upstream answered {status}: {sentence}"[:500], status=status, partial=partial, code=code)
    param = _named_param(body, message)
    if param and not sentence.startswith(f"{param}:"):
        sentence = f"{param}: {sentence}"  # the field first, as a validation sentence has it (`refused_param` reads it)
    return UpstreamRefused(f"upstream answered {status}: {sentence}"[:500], status=status, partial=partial,
                           code=code, param=param)


_REFUSED_PARAM = re.compile(r"^upstream answered (\d{3}): ([A-Za-z_][A-Za-z0-9_]*(?:[.\[][A-Za-z0-9_\]]*)*): ")


def refused_param(error: str) -> tuple[int, str] | None:
    """Return `(status, field)` when a run's `error` is a gateway's refusal naming a request field
    (the sentence `classify_status` writes: "upstream answered 500: response_format.type: …"),
    else None. Example: "upstream answered 400: tool_choice: …" → `(400, "tool_choice")`."""
    match = _REFUSED_PARAM.match(error or "")
    if not match or not (400 <= int(match.group(1)) < 600) or int(match.group(1)) == 429:
        return None
    return int(match.group(1)), match.group(2)


def output_token_cap(max_tokens: int | None) -> int:
    """Return the `max_tokens` a completion asks for: the agent's value capped by
    `AGENTS_MAX_OUTPUT_TOKENS`, or `AGENTS_DEFAULT_OUTPUT_TOKENS` (capped too) when the agent
    sets none. Example: cap 4096, default 1024: agent 8000 → 4096; agent None → 1024; agent 256 → 256."""
    cap = max(int(settings.AGENTS_MAX_OUTPUT_TOKENS), 1)
    if not max_tokens:
        return max(min(int(settings.AGENTS_DEFAULT_OUTPUT_TOKENS), cap), 1)
    return max(min(int(max_tokens), cap), 1)


def gateway_timeout(seconds_left: float | None) -> httpx2.Timeout:
    """Return the HTTP timeouts of one request to the gateway: connect
    `INFERENCE_CONNECT_TIMEOUT_SECONDS`, each read `INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS` (the
    longest quiet a stream may have; the watchdog holds the shorter gap between tokens), all
    at most `seconds_left` (the caller's deadline; None: `AGENTS_RUN_DEADLINE_SECONDS`)."""
    left = settings.AGENTS_RUN_DEADLINE_SECONDS if seconds_left is None else max(seconds_left, 0.001)
    connect = min(settings.INFERENCE_CONNECT_TIMEOUT_SECONDS, left)
    read = min(settings.INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS, left)
    return httpx2.Timeout(connect=connect, read=read, write=max(connect, min(30.0, left)), pool=connect)


def whole_timeout(seconds_left: float) -> httpx2.Timeout:
    """Return the HTTP timeouts of one completion asked not streamed: connect as `gateway_timeout`,
    the read the whole of `seconds_left` (the gateway answers once, when the reply is written)."""
    left = max(seconds_left, 0.001)
    connect = min(settings.INFERENCE_CONNECT_TIMEOUT_SECONDS, left)
    return httpx2.Timeout(connect=connect, read=left, write=max(connect, min(30.0, left)), pool=connect)


DEADLINE_PASSED = "the run's deadline passed"


def completion_limit(seconds_left: float | None) -> tuple[float, str]:
    """Return `(seconds, words)`: how long one completion may take and what its timeout says.

    The caller's `seconds_left` (None: `AGENTS_RUN_DEADLINE_SECONDS`), "the run's deadline
    passed"; or, when the deprecated `INFERENCE_TIMEOUT_SECONDS` is set and shorter, that many
    seconds (the whole completion, as it bounded before the timeouts were split). Example: 540 s
    left, INFERENCE_TIMEOUT_SECONDS 120 → `(120.0, "the completion took over 120 s (INFERENCE_TIMEOUT_SECONDS)")`.
    """
    total = settings.AGENTS_RUN_DEADLINE_SECONDS if seconds_left is None else max(seconds_left, 0.001)
    legacy = getattr(settings, "INFERENCE_TIMEOUT_SECONDS", None)
    if legacy and legacy < total:
        return float(legacy), f"the completion took over {legacy:g} s (INFERENCE_TIMEOUT_SECONDS)"
    return total, DEADLINE_PASSED


class _Clock:
    """The quiet limits of one streamed completion: no first piece of the reply (content or a
    tool call's fragment) within `INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS` of the request, no next
    piece within `INFERENCE_TOKEN_TIMEOUT_SECONDS` of the last, and the caller's deadline.
    `due()` says when the next piece is due and, in words, which limit that is; `fired` holds
    the words of the limit that ended the stream ("" while none did)."""

    def __init__(self, *, started: float, deadline: float, deadline_words: str = DEADLINE_PASSED) -> None:
        self.first = settings.INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS
        self.between = settings.INFERENCE_TOKEN_TIMEOUT_SECONDS
        self.deadline = deadline
        self.deadline_words = deadline_words
        self.last = started
        self.pieces = 0
        self.fired = ""

    def piece(self) -> None:
        """A piece of the reply arrived."""
        self.pieces += 1
        self.last = time.monotonic()

    def due(self) -> tuple[float, str]:
        """Return `(instant, words)`: the `time.monotonic()` instant by which the next piece must
        arrive, and the limit that instant is, in the words of the timeout's reason."""
        if self.pieces:
            gap, what = self.last + self.between, f"no token for {self.between:g} s (INFERENCE_TOKEN_TIMEOUT_SECONDS)"
        else:
            gap, what = self.last + self.first, f"no first token within {self.first:g} s (INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS)"
        return (gap, what) if gap < self.deadline else (self.deadline, self.deadline_words)


class _Watchdog(_Clock):
    """Ends a streamed completion of the sync path that goes quiet past its `_Clock`'s limits:
    it shuts the response's socket down (a blocked read returns at once); `fired` then says which
    limit, in words. One thread per streamed completion, waiting on an event. (The async path
    needs no thread: it awaits each chunk under an asyncio timeout at `due()`.)"""

    def __init__(self, *, started: float, deadline: float, deadline_words: str = DEADLINE_PASSED) -> None:
        super().__init__(started=started, deadline=deadline, deadline_words=deadline_words)
        self._done = False
        self._wake = threading.Event()  # set on the first piece (the limit shortens) and at the end
        self._response = None
        self._thread: threading.Thread | None = None

    def watch(self, response) -> None:
        """Start watching `response` (the SDK stream's `httpx2.Response`)."""
        self._response = response
        self._thread = threading.Thread(target=self._run, name="gateway-watchdog", daemon=True)
        self._thread.start()

    def piece(self) -> None:
        """A piece of the reply arrived."""
        super().piece()
        if self.pieces == 1:
            self._wake.set()

    def stop(self) -> None:
        """The stream ended (or failed): stop watching."""
        self._done = True
        self._wake.set()

    def _run(self) -> None:
        while True:
            due, what = self.due()
            left = due - time.monotonic()
            if self._done:
                return
            if left > 0:
                self._wake.wait(left)
                self._wake.clear()
                continue
            self.fired = what
            self._cut()
            return

    def _cut(self) -> None:
        stream = (getattr(self._response, "extensions", None) or {}).get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        try:
            if sock is not None:
                sock.shutdown(2)  # SHUT_RDWR: the run's blocked read returns now
            else:
                self._response.close()
        except Exception:  # already closed: the read ends anyway
            logger.debug("gateway watchdog: could not cut the stream", exc_info=True)


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

    def add(self, chunk, on_delta: Callable[[str], None] | None) -> bool:
        """Take one chunk; return True when it carried a piece of the reply (content or a tool call's fragment)."""
        piece = False
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
                    piece = True
                    self.content.append(delta.content)
                    if on_delta is not None:
                        on_delta(delta.content)
            for fragment in delta.tool_calls or []:
                piece = True
                call = self.calls.setdefault(fragment.index or 0, {"id": "", "name": "", "arguments": []})
                if fragment.id:
                    call["id"] = call["id"] or fragment.id
                function = fragment.function
                if function is not None:
                    if function.name and function.name != call["name"]:
                        call["name"] += function.name
                    if function.arguments:
                        call["arguments"].append(function.arguments)
        return piece

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
        message: dict = {"role": ChatRole.ASSISTANT, "content": self.text if (self.saw_content or not calls) else None}
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


#: The header every completion carries the run's id in (issue 32): a gateway's logs (LiteLLM's
#: spend logs) can be joined to the run.
RUN_ID_HEADER = "X-Agents-Run-Id"

_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})


_BROKEN = (openai.APIConnectionError, httpx.TransportError, httpx2.TransportError)
#: A prompt smaller than this cannot be over a context of 512 tokens (the smallest a server is
#: run with; a token is at least one byte): a stream of it that broke is not probed, only retried.
PROBE_MIN_BYTES = 512


def _prompt_bytes(messages: list[dict], tools: list[dict] | None) -> int:
    return len(json.dumps(messages, ensure_ascii=False).encode()) + (len(json.dumps(tools).encode()) if tools else 0)


def _plain_request(kwargs: dict) -> dict:
    """Return a streamed request's arguments asked not streamed (no `stream`, no `stream_options`)."""
    return {k: v for k, v in kwargs.items() if k not in ("stream", "stream_options")}


def _probe_request(kwargs: dict) -> dict:
    """Return the one-token probe of a streamed request: the same request, not streamed, `max_tokens` 1."""
    plain = _plain_request(kwargs)
    plain["max_tokens"] = 1
    return plain


def _whole(completion, on_delta: Callable[[str], None] | None) -> ChatCompletion:
    """Return a completion answered not streamed as the `ChatCompletion` a stream assembles to (choice 0,
    the finish reason read as `_Assembly` reads it, usage only when the gateway gave it); `on_delta`
    hears its content in one piece. Raises `UpstreamBusy` for an answer with no choices,
    `UpstreamRefused` for one of the wrong shape."""
    reply = _Assembly()
    reply.id, reply.model = getattr(completion, "id", "") or "", getattr(completion, "model", "") or ""
    reply.created = getattr(completion, "created", 0) or 0
    reply.usage = getattr(completion, "usage", None)
    try:
        for choice in getattr(completion, "choices", None) or []:
            if getattr(choice, "index", 0):
                continue
            reply.choices = True
            reply.finish = choice.finish_reason
            message = choice.message
            if message is None:
                continue
            if message.content is not None:
                reply.saw_content = True
                reply.content.append(message.content)
            for index, call in enumerate(message.tool_calls or []):
                function = getattr(call, "function", None)
                reply.calls[index] = {"id": call.id or "", "name": getattr(function, "name", "") or "",
                                      "arguments": [getattr(function, "arguments", "") or ""]}
    except (AttributeError, TypeError) as exc:
        raise UpstreamRefused(f"upstream answer unreadable: {exc}"[:500]) from exc
    answer = _answer(reply)
    if reply.text and on_delta is not None:
        on_delta(reply.text)
    return answer


def _plain_failure(exc: Exception, *, model: str, deadline_words: str) -> Exception:
    """Return the `UpstreamError` a completion asked not streamed raises for `exc` (as `_failure`;
    its timeout is the caller's deadline)."""
    if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
        return UpstreamBusy(f"upstream timed out: {deadline_words}")
    return _failure(exc, model=model, clock=_Clock(started=0.0, deadline=0.0), reply=_Assembly())


def _probe_refusal(exc: openai.APIStatusError, model: str) -> UpstreamRefused | None:
    """Return the refusal a probe's error answer names (a context overflow's window noted), else None."""
    failure = classify_status(exc.status_code, exc.body, exc.message)
    if not isinstance(failure, UpstreamRefused):
        return None
    if isinstance(failure, ContextOverflow) and failure.window:
        note_window(model, failure.window)
    return failure


def _probe(client, kwargs: dict, deadline: float, model: str) -> None:
    """Ask once more, not streamed and for one token, after a stream of a prompt of at least
    `PROBE_MIN_BYTES` that broke before its first piece or ended with no choice at all:
    llama-cpp-python answers 200, then breaks the stream or sends an empty body (0.3.36), for a
    request it refuses (a prompt over the context window), and answers the same request not
    streamed with its 400.
    Raises that refusal (`UpstreamRefused` / `ContextOverflow`, its window noted for `model`);
    returns when the probe is answered or fails otherwise (the break was transient: the
    caller's failure stands). `_probe_async` is the same on an event loop."""
    left = deadline - time.monotonic()
    if left <= 0.5:
        return
    try:
        client.with_options(timeout=gateway_timeout(left)).chat.completions.create(**_probe_request(kwargs))
    except openai.APIStatusError as exc:
        failure = _probe_refusal(exc, model)
        if failure is not None:
            raise failure from exc
    except Exception:
        logger.debug("gateway probe after a broken stream failed", exc_info=True)


async def _probe_async(client, kwargs: dict, deadline: float, model: str) -> None:
    """`_probe` with the async client (awaited on the event loop)."""
    left = deadline - time.monotonic()
    if left <= 0.5:
        return
    try:
        await client.chat.completions.create(**_probe_request(kwargs), timeout=gateway_timeout(left))
    except openai.APIStatusError as exc:
        failure = _probe_refusal(exc, model)
        if failure is not None:
            raise failure from exc
    except Exception:
        logger.debug("gateway probe after a broken stream failed", exc_info=True)


def _request(*, model: str, messages: list[dict], tools: list[dict] | None, max_tokens: int | None, temperature: float | None,
             top_p: float | None, run_id: str, passthrough: dict | None) -> dict:
    """Return the SDK's `chat.completions.create` arguments of one streamed completion (both paths)."""
    kwargs: dict = {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True},
                    "max_tokens": output_token_cap(max_tokens)}
    for name, value in (passthrough or {}).items():
        if name in ("tool_choice", "parallel_tool_calls") and not tools:
            continue  # no tools offered this round (the loop's last): a gateway refuses a tool choice without tools
        kwargs.setdefault(name, value)
    if tools:
        kwargs["tools"] = tools
    if temperature is not None:
        kwargs["temperature"] = temperature
    if top_p is not None:
        kwargs["top_p"] = top_p
    if run_id:
        kwargs["extra_headers"] = {RUN_ID_HEADER: run_id}
        if settings.AGENTS_GATEWAY_RUN_METADATA:
            # LiteLLM records `metadata.tags` as the spend log's `request_tags` (usage joined to the run).
            kwargs["extra_body"] = {"metadata": {"agents_run_id": run_id, "tags": [f"agents_run:{run_id}"]}}
    return kwargs


def _probe_after_break(exc: Exception, clock: _Clock, reply: _Assembly, messages: list[dict], tools: list[dict] | None) -> bool:
    """Return True when a stream that failed with `exc` is to be probed: it broke (not a timeout
    of ours) after its first chunk but before its first piece, for a prompt that could be over the context."""
    return (not clock.fired and reply.choices and not clock.pieces and isinstance(exc, _BROKEN)
            and _prompt_bytes(messages, tools) >= PROBE_MIN_BYTES)


def _probe_when_empty(reply: _Assembly, messages: list[dict], tools: list[dict] | None) -> bool:
    """Return True when a stream that ended is to be probed: nothing came back for a prompt that could be over the context.

    llama-cpp-python 0.3.36 answers a streamed prompt over its context with a 200 whose body is
    empty; LiteLLM's proxy 1.108.7 turns that (and a backend's 500) into an empty reply with
    finish_reason "stop" (both recorded: tests/support/transcripts/*-recorded.json). The
    one-token probe names the refusal; an empty answer it does not explain stands."""
    return not reply.text and not reply.calls and _prompt_bytes(messages, tools) >= PROBE_MIN_BYTES


def _failure(exc: Exception, *, model: str, clock: _Clock, reply: _Assembly) -> Exception:
    """Return the `UpstreamError` a failed streamed completion raises for `exc` (both paths): a
    timeout when a quiet limit ended the stream (`clock.fired`), else by the exception's kind
    (see `chat_completion`'s Raises); a context overflow's window is noted for `model`. Returns
    `exc` itself when it is already an `UpstreamError` or nothing the gateway caused."""
    failure: Exception = exc
    if isinstance(exc, UpstreamError):
        pass
    elif clock.fired:  # a quiet stream was cut: whatever the read raised, that is why
        failure = UpstreamBusy(f"upstream timed out: {clock.fired}", partial=reply.text)
    elif isinstance(exc, openai.APIStatusError):
        failure = classify_status(exc.status_code, exc.body, exc.message, partial=reply.text)
    elif isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
        failure = UpstreamBusy("upstream timed out", partial=reply.text)
    elif isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        cause = exc.__cause__ or exc
        reason = "upstream stream broke off" if reply.choices else "upstream unreachable"
        failure = UpstreamBusy(f"{reason}: {cause}"[:500], partial=reply.text)
    elif isinstance(exc, openai.APIError):  # an error frame inside the stream (the gateway failed while answering)
        failure = classify_status(500, exc.body, exc.message, partial=reply.text)
        if isinstance(failure, UpstreamBusy):
            failure = UpstreamBusy(f"upstream failed while streaming: {_one_line(exc.message)}"[:500], partial=reply.text)
    elif isinstance(exc, (openai.OpenAIError, ValueError)):  # ValueError: a chunk that is not JSON
        failure = UpstreamRefused(f"upstream answer unreadable: {exc}"[:500], partial=reply.text)
    if isinstance(failure, ContextOverflow) and failure.window:
        note_window(model, failure.window)
    return failure


def _answer(reply: _Assembly) -> ChatCompletion:
    """Return a stream's assembled answer; raise `UpstreamBusy` when it had no choices,
    `UpstreamRefused` when its tool calls or usage are of the wrong shape."""
    if not reply.choices:
        raise UpstreamBusy("upstream answered with no choices")
    try:
        return reply.completion()
    except ValueError as exc:  # pydantic's ValidationError: a tool call or usage of the wrong shape
        raise UpstreamRefused(f"upstream answer unreadable: {exc}"[:500], partial=reply.text) from exc


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
    run_id: str = "",
    passthrough: dict | None = None,
    stream: bool = True,
) -> ChatCompletion:
    """Stream one chat completion from the gateway; return it assembled as a `ChatCompletion` (1 choice).

    In: `model`, OpenAI-shaped `messages`, optional OpenAI `tools` definitions, an optional
    `timeout`: the seconds left before the caller's deadline (default
    `AGENTS_RUN_DEADLINE_SECONDS`; shortened by the deprecated `INFERENCE_TIMEOUT_SECONDS` when
    set: `completion_limit`), within which the connect, first-token and between-token
    timeouts apply; `on_delta(text)` called with each piece of the reply's content as it
    arrives (raw, unmasked; must not raise), and the generation settings: `max_tokens` (capped
    by `AGENTS_MAX_OUTPUT_TOKENS`; `AGENTS_DEFAULT_OUTPUT_TOKENS` when None), `temperature`,
    `top_p` (sent only when set); `run_id`, sent as the `X-Agents-Run-Id` header (and as
    `metadata.agents_run_id` with `AGENTS_GATEWAY_RUN_METADATA`); `passthrough`, OpenAI request
    fields sent unchanged (`response_format`, `tool_choice`, `stop`, `seed`, `user`…: an
    OpenAI-compatible caller's own). `stream=False` asks the gateway not streamed (issue 53: a caller
    that waits for the whole answer; llama-cpp-python reports `usage` only there): one request whose
    read may take all of `timeout`, `on_delta` called once with the whole content, the same failures
    (no probe: a gateway answers a prompt over its window not streamed with its 400).
    Out: the SDK's `ChatCompletion`: `choices[0].message` with `content` (the pieces joined) and
    `tool_calls` (fragments joined by index), `usage` when the gateway reports it.
    Raises `UpstreamBusy` for 429, a 5xx that is not a refusal, connection errors, timeouts
    (the reason names the limit) and a stream that breaks off (mid-stream failures carry the
    text received so far in `partial`), and for an answer with no choices; `ContextOverflow`
    when the gateway says the prompt is over the context window (its window remembered:
    `context_window`), also when a stream broke before its first piece or brought no reply at all
    (an empty body, or LiteLLM's empty `stop`) and the one-token probe names it; `UpstreamRefused` for any other 4xx, a 5xx refusal (`classify_status`), an
    unreadable answer, or when no gateway is configured.
    Blocks the calling thread (releases its database connections first); `chat_completion_async`
    is the same completion awaited on an event loop.
    """
    client = get_client()
    if client is None:
        raise UpstreamRefused("inference is not configured on this deployment")
    stores.release_connections()  # the wait on the model holds no database connection
    total, deadline_words = completion_limit(timeout)
    kwargs = _request(model=model, messages=messages, tools=tools, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                      run_id=run_id, passthrough=passthrough)
    if not stream:
        try:
            answered = client.with_options(timeout=whole_timeout(total)).chat.completions.create(**_plain_request(kwargs))
        except Exception as exc:
            failure = _plain_failure(exc, model=model, deadline_words=deadline_words)
            if failure is exc:
                raise
            raise failure from exc
        return _whole(answered, on_delta)
    client = client.with_options(timeout=gateway_timeout(total))
    reply = _Assembly()
    started = time.monotonic()
    watchdog = _Watchdog(started=started, deadline=started + total, deadline_words=deadline_words)
    try:
        stream = client.chat.completions.create(**kwargs)
        watchdog.watch(getattr(stream, "response", None))
        try:
            for chunk in stream:
                if reply.add(chunk, on_delta):
                    watchdog.piece()
                if time.monotonic() - started > total:
                    raise UpstreamBusy(f"upstream timed out: {deadline_words}", partial=reply.text)
        finally:
            watchdog.stop()
            stream.close()
        if watchdog.fired:
            raise UpstreamBusy(f"upstream timed out: {watchdog.fired}", partial=reply.text)
    except Exception as exc:
        if _probe_after_break(exc, watchdog, reply, messages, tools):
            _probe(client, kwargs, started + total, model)  # raises the refusal a broken stream hid
        failure = _failure(exc, model=model, clock=watchdog, reply=reply)
        if failure is exc:
            raise
        raise failure from exc
    if _probe_when_empty(reply, messages, tools):
        _probe(client, kwargs, started + total, model)
    return _answer(reply)


async def chat_completion_async(
    *,
    model: str,
    messages: list[dict],
    tools: list[dict] | None = None,
    timeout: float | None = None,
    on_delta: Callable[[str], None] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    run_id: str = "",
    passthrough: dict | None = None,
    stream: bool = True,
) -> ChatCompletion:
    """Stream one chat completion from the gateway on the running event loop; return it assembled.

    In, Out and Raises: exactly `chat_completion`'s (the same request, assembly, failure
    classification, probe and timeout reasons: they share `_request`, `_Assembly`, `_failure`
    and `_Clock`). `on_delta(text)` is called on the event loop (it must not block). No thread
    waits: each chunk is awaited under an asyncio timeout at the `_Clock`'s due instant (first
    token, between tokens, the caller's deadline in seconds, or `INFERENCE_TIMEOUT_SECONDS`);
    the client is the loop's own `AsyncOpenAI` (`get_async_client`). Touches no database.
    Cancelling the awaiting task cancels the HTTP request (the connection is closed) and
    raises `asyncio.CancelledError`.
    """
    client = get_async_client()
    if client is None:
        raise UpstreamRefused("inference is not configured on this deployment")
    total, deadline_words = completion_limit(timeout)
    kwargs = _request(model=model, messages=messages, tools=tools, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                      run_id=run_id, passthrough=passthrough)
    if not stream:
        try:
            answered = await client.chat.completions.create(**_plain_request(kwargs), timeout=whole_timeout(total))
        except Exception as exc:
            failure = _plain_failure(exc, model=model, deadline_words=deadline_words)
            if failure is exc:
                raise
            raise failure from exc
        return _whole(answered, on_delta)
    reply = _Assembly()
    started = time.monotonic()
    clock = _Clock(started=started, deadline=started + total, deadline_words=deadline_words)
    try:
        # The timeouts per request, not `with_options`: a copied client reads its platform again
        # for its headers, on a thread (`asyncify`), at every request.
        stream = await client.chat.completions.create(**kwargs, timeout=gateway_timeout(total))
        try:
            while True:
                due, what = clock.due()
                quiet = asyncio.timeout(max(due - time.monotonic(), 0.0))
                try:
                    async with quiet:
                        chunk = await stream.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    if quiet.expired():  # the limit passed: the read was cancelled (its connection closed)
                        clock.fired = what
                    raise
                if reply.add(chunk, on_delta):
                    clock.piece()
                if time.monotonic() - started > total:
                    raise UpstreamBusy(f"upstream timed out: {deadline_words}", partial=reply.text)
        finally:
            await stream.close()
    except Exception as exc:
        if _probe_after_break(exc, clock, reply, messages, tools):
            await _probe_async(client, kwargs, started + total, model)  # raises the refusal a broken stream hid
        failure = _failure(exc, model=model, clock=clock, reply=reply)
        if failure is exc:
            raise
        raise failure from exc
    if _probe_when_empty(reply, messages, tools):
        await _probe_async(client, kwargs, started + total, model)
    return _answer(reply)


def reset_caches() -> None:
    """Forget the cached clients (the sync one and every event loop's async one) and catalog (tests and settings changes)."""
    global _client, _client_key, _catalog
    with _lock:
        _client = None
        _client_key = None
        _catalog = None
        _async_clients.clear()
        for cache in (_listed_windows, _learned_windows, _ratios, _tokenizer, _counts):
            cache.clear()
