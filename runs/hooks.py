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
* `register_resume_handler(kind, prompt=fn, finished=fn, dispatch=fn)`: for a run of `kind` resumed
  after its approvals were answered (issue 28), `prompt(run, agent)` returns its opening messages (a
  chat round: the conversation's thread), `finished(run)` is called once the resumed run has finished
  (a chat round: its reply posted to the conversation). `dispatch(run)`, when given, resumes the run
  elsewhere instead of the server's resume task (a routed run: offered to its machine again); it is
  called inside the transaction of the last answer and must be idempotent. Org context.
* `register_callback_resolver(fn)` / `with request_callback(url):`: a run request's own callback URL
  (`webhook` of POST …/{ref}/run): `fn(url)` checks it (raising a 400) and returns what the
  run-started handler needs; `with request_callback(url):` keeps that for the run the block starts first.

Where the run machinery must reach the agents app's own code (issue 27 item 2), the agents app
registers it here from its `ready()` (none registered: what needs it fails loudly):

* `register_run_executor(fn)`: `fn(run)` executes a queued run this worker took (lease held):
  the agent loop (`runs.background.run_execute_queued`).
* `register_run_resumer(fn)`: `fn(run_id=…) -> status` resumes a waiting run whose approvals
  are all answered (`runs.tasks.resume_run`). Org context.
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


_resume_handlers: dict[str, dict[str, Callable]] = {}


def register_resume_handler(kind: str, *, prompt: Callable | None = None, finished: Callable | None = None,
                            dispatch: Callable | None = None) -> None:
    """Register how a resumed run of `kind` gets its opening messages, what follows its finish and
    (`dispatch`) who resumes it when not the server's resume task."""
    _resume_handlers[str(kind)] = {"prompt": prompt, "finished": finished, "dispatch": dispatch}


def resume_dispatcher(kind: str) -> Callable | None:
    """Return `dispatch(run)` registered for runs of `kind` (resumed elsewhere), or None (the resume task)."""
    return (_resume_handlers.get(str(kind)) or {}).get("dispatch")


def resume_prompt(run, agent) -> list[dict] | None:
    """Return the opening messages of resumed `run` from its kind's handler, or None (the agent's own prompt)."""
    prompt = (_resume_handlers.get(str(run.kind)) or {}).get("prompt")
    return prompt(run, agent) if prompt is not None else None


def resume_finished(run) -> None:
    """Call the finished handler of resumed `run`'s kind, if any; log (never raise) what it raises."""
    finished = (_resume_handlers.get(str(run.kind)) or {}).get("finished")
    if finished is None:
        return
    try:
        finished(run)
    except Exception:
        logger.exception("run %s: the resumed run's finished handler failed", getattr(run, "id", "?"))


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


_agent_code: dict[str, Callable] = {}


def register_run_executor(fn: Callable) -> None:
    """Use `fn(run)` to execute a queued run a worker took (the last registration wins)."""
    _agent_code["executor"] = fn


def register_run_resumer(fn: Callable) -> None:
    """Use `fn(run_id=…) -> str` to resume a waiting run whose approvals are answered (the last registration wins)."""
    _agent_code["resumer"] = fn


def register_inference_check(fn: Callable[[], bool]) -> None:
    """Use `fn() -> bool` to tell whether a model gateway is configured (the last registration wins)."""
    _agent_code["inference"] = fn


def register_completion(sync: Callable, async_: Callable) -> None:
    """Use `sync(**kwargs)` / `await async_(**kwargs)` for the completions runs wait on (the last registration wins)."""
    _agent_code["complete"], _agent_code["complete_async"] = sync, async_


def register_tool_schema(fn: Callable) -> None:
    """Use `fn(tool_name, *, agent_name, depth) -> dict | None` for a tool's argument schema (the last registration wins)."""
    _agent_code["tool_schema"] = fn


def agent_code(name: str) -> Callable:
    """Return the registered agent-side function `name` (`executor`, `resumer`, `inference`,
    `complete`, `complete_async`, `tool_schema`).

    Raises `LookupError` when the agents app registered none (it is not installed).
    """
    try:
        return _agent_code[name]
    except KeyError:
        raise LookupError(f"runs: no {name} registered (the agents app registers it in its ready())") from None


def inference_configured() -> bool:
    """Return whether a model gateway is configured (the registered check; False when none is)."""
    check = _agent_code.get("inference")
    return bool(check and check())

