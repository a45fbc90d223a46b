"""Registries through which higher apps reach into the run machinery without being imported.

runs sits below the apps built on it (agents, chat, coding, targets, webhooks, …): it never names
them, not even in a function-level import (`.importlinter`; `tests/runs/test_layering.py`). A
higher app registers its handler here from its `AppConfig.ready()`, the way `django.contrib.admin`
collects `ModelAdmin`s.

* `register_conversation_replies(exists, append)`: the chat app's `exists(conversation_id) -> bool`
  and `append(*, conversation_id, text, run_id) -> bool` (an assistant turn), used by runs that
  post their result into a conversation (`replyConversationId` of a coding run). Org context.
* `register_run_started_handler(fn)`: `fn(run)` is called by the run lifecycle's `run_start`
  inside its transaction, once the run row is inserted (every kind of run). A handler that
  raises aborts the start (nothing is written).
* `register_run_finishing_handler(fn)`: `fn(run)` is called by the run lifecycle's `run_finish`
  inside its transaction, once the outcome is recorded (every kind of run), in a savepoint of its
  own: its writes commit with the finish or not at all, and what it raises is logged and never
  undoes the finish. For what must be durable exactly when the finish is (the `run.finished`
  webhook deliveries); queue side effects with `transaction.on_commit`.
* `register_run_finished_handler(fn)`: `fn(run, org_slug)` is called once a finished run's row
  has committed and it was debited (`runs.lifecycle._after_finish`), in org context. What
  it raises is logged; it never undoes the finish.
* `register_run_waiting_handler(fn)`: `fn(run, approvals, org_slug)` is called once a run's move
  to `waiting` has committed (issue 28), with the wire views of its waiting turn's calls. What it
  raises is logged.
* `register_callback_resolver(fn)` / `with request_callback(url):`: a run request's own callback URL
  (`webhook` of POST …/{ref}/run): `fn(url)` checks it (raising a 400) and returns what the
  run-started handler needs; `with request_callback(url):` keeps that for the run the block starts first.

What differs by kind of run — who executes a queued run, who resumes a waiting one and how, its
in-flight limit — is not registered here: it is the kind's `RunPolicy` (`runs.policies`).
Where the run machinery must reach the agents app's code whatever the kind (issue 27 item 2), the
agents app registers it here from its `ready()`, one typed function each (none registered: what
needs it fails loudly); the first two go when inference becomes its own app below runs:

* `register_inference_check(fn)`: `fn() -> bool`, whether a model gateway is configured
  (`runs.lifecycle.run_start` refuses a run needing one with 503 when it is not).
* `register_completion(sync, async_)`: the gateway call a run's `Ask` step waits on
  (`runs.drive`): `sync(**kwargs)` blocks, `await async_(**kwargs)` waits on the event loop.
* `register_tool_schema(fn)`: `fn(tool_name, *, agent_name, depth) -> dict | None`, the JSON
  schema of a tool's arguments (`runs.approvals` checks an approver's edited arguments).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from agents_site.errors import InvalidRequest
from tenancy import stores

logger = logging.getLogger(__name__)

_conversations: dict[str, Callable] = {}
_started_handlers: list[Callable] = []
_finishing_handlers: list[Callable] = []
_finished_handlers: list[Callable] = []
_callback_resolver: list[Callable] = []
#: The checked callback of the run this request (or task) starts next; taken by the first run started.
requested_callback: ContextVar[object | None] = ContextVar("agents_requested_callback", default=None)


def register_conversation_replies(*, exists: Callable[[str], bool], append: Callable[..., bool]) -> None:
    """Register how a run checks a conversation of the org and appends an assistant turn to it."""
    _conversations["exists"], _conversations["append"] = exists, append


def conversation_exists(conversation_id: str) -> bool:
    """Return True when `conversation_id` is a conversation of the current org (False without a chat app)."""
    exists = _conversations.get("exists")
    return bool(exists and exists(conversation_id))


def conversation_post(*, conversation_id: str, text: str, run_id: str = "") -> bool:
    """Append `text` as an assistant turn of conversation `conversation_id`; return whether it was stored."""
    append = _conversations.get("append")
    return bool(append and append(conversation_id=conversation_id, text=text, run_id=run_id))
def register_run_started_handler(fn: Callable) -> None:
    """Call `fn(run)` inside `run_start`'s transaction for every run started (idempotent per function)."""
    if fn not in _started_handlers:
        _started_handlers.append(fn)


def run_started_handlers(run) -> None:
    """Call every registered run-started handler with `run` (inside the start's transaction)."""
    for fn in list(_started_handlers):
        fn(run)


def register_run_finishing_handler(fn: Callable) -> None:
    """Call `fn(run)` inside every run's finish transaction (idempotent per function)."""
    if fn not in _finishing_handlers:
        _finishing_handlers.append(fn)


def run_finishing_handlers(run) -> None:
    """Call every registered run-finishing handler with `run`, each in a savepoint of the finish's
    org transaction; log (never raise) what one raises (its savepoint is rolled back)."""
    for fn in list(_finishing_handlers):
        try:
            with stores.org_atomic():
                fn(run)
        except Exception:
            logger.exception("run %s: a run-finishing handler failed", getattr(run, "id", "?"))


def register_run_finished_handler(fn: Callable) -> None:
    """Call `fn(run, org_slug)` after every run's finish commits (idempotent per function)."""
    if fn not in _finished_handlers:
        _finished_handlers.append(fn)


def run_finished_handlers(run, org_slug: str) -> None:
    """Call every registered run-finished handler; log (never raise) what one raises."""
    for fn in list(_finished_handlers):
        try:
            fn(run, org_slug)
        except Exception:
            logger.exception("run %s: a run-finished handler failed", getattr(run, "id", "?"))


_waiting_handlers: list[Callable] = []


def register_run_waiting_handler(fn: Callable) -> None:
    """Call `fn(run, approvals, org_slug)` after every run's move to `waiting` commits (idempotent per function)."""
    if fn not in _waiting_handlers:
        _waiting_handlers.append(fn)


def run_waiting_handlers(run, approvals: list[dict], org_slug: str) -> None:
    """Call every registered run-waiting handler; log (never raise) what one raises."""
    for fn in list(_waiting_handlers):
        try:
            fn(run, approvals, org_slug)
        except Exception:
            logger.exception("run %s: a run-waiting handler failed", getattr(run, "id", "?"))


def register_callback_resolver(fn: Callable) -> None:
    """Use `fn(url) -> checked` to check a run request's callback URL (the last registration wins)."""
    _callback_resolver[:] = [fn]


@contextmanager
def request_callback(url: str | None) -> Iterator[None]:
    """Check `url` (None: nothing asked) and keep it, while the block runs, for the run it starts next.

    Raises what the resolver raises (400 `invalid_request` for a URL outside the org's webhook
    endpoints) before anything is written, and `InvalidRequest` when no resolver is registered.
    Org context required.
    """
    if url is None:
        yield
        return
    if not _callback_resolver:
        raise InvalidRequest("webhook: callbacks are not available")
    token = requested_callback.set(_callback_resolver[0](url))
    try:
        yield
    finally:
        requested_callback.reset(token)


_inference_check: list[Callable[[], bool]] = []
_completion: list[tuple[Callable, Callable]] = []
_tool_schema: list[Callable] = []


def register_inference_check(fn: Callable[[], bool]) -> None:
    """Use `fn() -> bool` to tell whether a model gateway is configured (the last registration wins)."""
    _inference_check[:] = [fn]


def inference_configured() -> bool:
    """Return whether a model gateway is configured (the registered check; False when none is)."""
    return bool(_inference_check and _inference_check[0]())


def register_completion(sync: Callable, async_: Callable) -> None:
    """Use `sync(**kwargs)` / `await async_(**kwargs)` for the completions runs wait on (the last registration wins)."""
    _completion[:] = [(sync, async_)]


def completion() -> tuple[Callable, Callable]:
    """Return the registered `(sync, async_)` completion; raise `LookupError` when none is (no agents app)."""
    if not _completion:
        raise LookupError("runs: no completion registered (the agents app registers it in its ready())")
    return _completion[0]


def register_tool_schema(fn: Callable) -> None:
    """Use `fn(tool_name, *, agent_name, depth) -> dict | None` for a tool's argument schema (the last registration wins)."""
    _tool_schema[:] = [fn]


def tool_schema(tool_name: str, *, agent_name: str, depth: int) -> dict | None:
    """Return the JSON schema of tool `tool_name`'s arguments as agent `agent_name` sees it (None: unknown tool).

    Raises `LookupError` when no schema source is registered (no agents app).
    """
    if not _tool_schema:
        raise LookupError("runs: no tool schema registered (the agents app registers it in its ready())")
    return _tool_schema[0](tool_name, agent_name=agent_name, depth=depth)
