"""Registries through which higher apps reach into the run machinery without being imported.

runs sits below the apps built on it (agents, chat, coding, targets, webhooks, …): it never names
them, not even in a function-level import (`.importlinter`; `tests/runs/test_layering.py`). A
higher app registers its handler here from its `AppConfig.ready()`, the way `django.contrib.admin`
collects `ModelAdmin`s (each registry is listed in `server/registries.py` with why it cannot be an import).

* `register_run_observer(observer)`: a `RunObserver` — what an app above runs does at every run's
  transitions, whatever its kind (webhooks: the `run.finished` and `run.waiting` deliveries, a
  request's own callback). One object per observing app, as a kind of run is one `RunPolicy`:
  - `started(run)`: called by the run lifecycle's `run_start` inside its transaction, once the
    run row is inserted. What it raises aborts the start (nothing is written).
  - `finishing(run)`: called by `run_finish` inside its transaction, once the outcome is recorded,
    in a savepoint of its own (after the kind's own `RunPolicy.finishing`): its writes commit with
    the finish or not at all, and what it raises is logged and never undoes the finish. For what
    must be durable exactly when the finish is; queue side effects with `transaction.on_commit`.
  - `finished(run, org_slug)`: called once a finished run's row has committed and it was debited
    (`runs.lifecycle._after_finish`), in org context. What it raises is logged.
  - `waiting(run, approvals, org_slug)`: called once a run's move to `waiting` has committed
    (issue 28), with the wire views of its waiting turn's calls. What it raises is logged.
  - `resolve_callback(url)`: checks a run request's own callback URL (`webhook` of POST
    …/{ref}/run; raising a 400) and returns what `started` needs, or None when this observer
    takes no callbacks; `with request_callback(url):` keeps it for the run the block starts first.

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


class RunObserver:
    """What an app above runs does at every run's transitions (a subclass overrides what it needs)."""

    def started(self, run) -> None:
        """Act inside `run_start`'s transaction for `run` (raising aborts the start)."""

    def finishing(self, run) -> None:
        """Act inside `run`'s finish transaction (in a savepoint; what it raises is logged)."""

    def finished(self, run, org_slug: str) -> None:
        """Act once `run`'s finish has committed and it was debited (in org context)."""

    def waiting(self, run, approvals: list[dict], org_slug: str) -> None:
        """Act once `run`'s move to `waiting` has committed; `approvals`: the wire views of its calls."""

    def resolve_callback(self, url: str) -> object | None:
        """Return the checked form of callback `url` (raise a 400 for a bad one); None: no callbacks here."""
        return None


_observers: list[RunObserver] = []
#: The checked callback of the run this request (or task) starts next; taken by the first run started.
requested_callback: ContextVar[object | None] = ContextVar("agents_requested_callback", default=None)


def register_run_observer(observer: RunObserver) -> None:
    """Let `observer` hear every run's transitions (from its app's `AppConfig.ready`; idempotent per object)."""
    if observer not in _observers:
        _observers.append(observer)


def run_started_handlers(run) -> None:
    """Call every observer's `started(run)` (inside the start's transaction)."""
    for observer in list(_observers):
        observer.started(run)


def run_finishing_handlers(run, kind_finishing: Callable | None = None) -> None:
    """Call `kind_finishing(run)` (the kind's `RunPolicy.finishing`), then every observer's `finishing(run)`,
    each in a savepoint of the finish's org transaction; log (never raise) what one raises (its savepoint is rolled back)."""
    handlers = [observer.finishing for observer in list(_observers)]
    for fn in [kind_finishing, *handlers] if kind_finishing is not None else handlers:
        try:
            with stores.org_atomic():
                fn(run)
        except Exception:
            logger.exception("run %s: a run-finishing handler failed", getattr(run, "id", "?"))


def run_finished_handlers(run, org_slug: str) -> None:
    """Call every observer's `finished(run, org_slug)`; log (never raise) what one raises."""
    for observer in list(_observers):
        try:
            observer.finished(run, org_slug)
        except Exception:
            logger.exception("run %s: a run-finished handler failed", getattr(run, "id", "?"))


def run_waiting_handlers(run, approvals: list[dict], org_slug: str) -> None:
    """Call every observer's `waiting(run, approvals, org_slug)`; log (never raise) what one raises."""
    for observer in list(_observers):
        try:
            observer.waiting(run, approvals, org_slug)
        except Exception:
            logger.exception("run %s: a run-waiting handler failed", getattr(run, "id", "?"))


@contextmanager
def request_callback(url: str | None) -> Iterator[None]:
    """Check `url` (None: nothing asked) and keep it, while the block runs, for the run it starts next.

    Raises what the observer resolving it raises (400 `invalid_request` for a URL outside the org's
    webhook endpoints) before anything is written, and `InvalidRequest` when no observer takes callbacks.
    Org context required.
    """
    if url is None:
        yield
        return
    checked = next((c for observer in list(_observers) if (c := observer.resolve_callback(url)) is not None), None)
    if checked is None:
        raise InvalidRequest("webhook: callbacks are not available")
    token = requested_callback.set(checked)
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
