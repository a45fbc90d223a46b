"""The inference gateway: one `openai` SDK client per process, and the served model catalog.

Configured by `INFERENCE_BASE_URL`, `INFERENCE_API_KEY` and `INFERENCE_TIMEOUT_SECONDS`. The
SDK's own retries are off (`max_retries=0`): the run path applies the spec's retry policy.
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


def reset_caches() -> None:
    """Forget the cached client and catalog (tests and settings changes)."""
    global _client, _client_key, _catalog
    with _lock:
        _client = None
        _client_key = None
        _catalog = None
