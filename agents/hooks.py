"""Registries through which higher apps reach into the agents layer without being imported.

agents sits below the apps built on it (identity, …): it never names them, not even in a
function-level import. A higher app registers its handler here from its `AppConfig.ready()`.
The run machinery's own registries (run started/finishing/finished, resume, callbacks, the
executor of a queued run) are `runs.hooks`.

* `register_agent_delete_handler(fn)`: `fn(agent)` is called by `agents.services.agent_delete`
  inside the delete's org-store transaction, before the agent row goes, for every agent deleted
  (whatever route deleted it). A handler that raises aborts the delete (nothing is written).

An app's django-q2 schedules are no registry: each app declares `tasks.SCHEDULES` and the
composition root's `manage.py ensure_schedules` (`server`) imports them.
"""

from __future__ import annotations

from collections.abc import Callable

_delete_handlers: list[Callable] = []


def register_agent_delete_handler(fn: Callable) -> None:
    """Call `fn(agent)` before every agent is deleted (idempotent per function)."""
    if fn not in _delete_handlers:
        _delete_handlers.append(fn)


def run_agent_delete_handlers(agent) -> None:
    """Call every registered delete handler with `agent`, in registration order.

    Must run inside the delete's org-store transaction (`agents.services.agent_delete`).
    """
    for fn in list(_delete_handlers):
        fn(agent)
