"""The inference gateway: one `openai` SDK client per process, the served model catalog, and
one chat completion with its failure classified.

Configured by `INFERENCE_BASE_URL`, `INFERENCE_API_KEY` and `INFERENCE_TIMEOUT_SECONDS`. The
SDK's own retries are off (`max_retries=0`): the run path applies the spec's retry policy
(`agents.execution.completion`) to the `UpstreamBusy` failures raised here.
"""

from __future__ import annotations

import logging
import threading
import time

import openai
from django.conf import settings

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_client: openai.OpenAI | None = None
_client_key: tuple | None = None
_catalog: tuple[float, str, frozenset[str] | None] | None = None


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

    def __init__(self, reason: str, *, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


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


def chat_completion(*, model: str, messages: list[dict], tools: list[dict] | None = None, timeout: float | None = None):
    """Ask the gateway for one chat completion; return the SDK's `ChatCompletion` (≥1 choice).

    In: `model`, OpenAI-shaped `messages`, optional OpenAI `tools` definitions, an optional
    per-call `timeout` in seconds (default `INFERENCE_TIMEOUT_SECONDS`).
    Raises `UpstreamBusy` for 429, 5xx, connection errors and timeouts, and for an answer with
    no choices; `UpstreamRefused` for any other status; `UpstreamRefused` when no gateway is
    configured.
    """
    client = get_client()
    if client is None:
        raise UpstreamRefused("inference is not configured on this deployment")
    if timeout is not None:
        client = client.with_options(timeout=max(timeout, 0.001))
    kwargs: dict = {"model": model, "messages": messages}
    if tools:
        kwargs["tools"] = tools
    try:
        completion = client.chat.completions.create(**kwargs)
    except openai.APIStatusError as exc:
        if exc.status_code == 429 or exc.status_code >= 500:
            raise UpstreamBusy(_status_reason(exc), status=exc.status_code) from exc
        raise UpstreamRefused(_status_reason(exc), status=exc.status_code) from exc
    except openai.APITimeoutError as exc:
        raise UpstreamBusy("upstream timed out") from exc
    except openai.APIConnectionError as exc:
        raise UpstreamBusy(f"upstream unreachable: {exc.__cause__ or exc}"[:500]) from exc
    except openai.OpenAIError as exc:
        raise UpstreamRefused(f"upstream answer unreadable: {exc}"[:500]) from exc
    if not getattr(completion, "choices", None):
        raise UpstreamBusy("upstream answered with no choices")
    return completion


def reset_caches() -> None:
    """Forget the cached client and catalog (tests and settings changes)."""
    global _client, _client_key, _catalog
    with _lock:
        _client = None
        _client_key = None
        _catalog = None
