"""Registries through which higher apps reach into the agents layer without being imported.

agents sits below the apps built on it (identity, …): it never names them, not even in a
function-level import. A higher app registers its handler here from its `AppConfig.ready()`,
the way `django.contrib.admin` collects `ModelAdmin`s.

* `register_agent_delete_handler(fn)`: `fn(agent)` is called by `agents.services.agent_delete`
  inside the delete's org-store transaction, before the agent row goes, for every agent deleted
  (whatever route deleted it). A handler that raises aborts the delete (nothing is written).
* `register_conversation_replies(exists, append)`: the chat app's `exists(conversation_id) -> bool`
  and `append(*, conversation_id, text, run_id) -> bool` (an assistant turn), used by runs that
  post their result into a conversation (`replyConversationId` of a coding run). Org context.
* `register_schedule(name, func, cron)`: a django-q2 schedule `manage.py ensure_schedules`
  installs beside the platform's own (`func` is a dotted path, `cron` 5 fields).
"""

from __future__ import annotations

from collections.abc import Callable

_delete_handlers: list[Callable] = []
_schedules: dict[str, tuple[str, str]] = {}
_conversations: dict[str, Callable] = {}


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


def register_schedule(name: str, func: str, cron: str) -> None:
    """Add django-q2 schedule `name` (dotted `func`, 5-field `cron`) to `ensure_schedules`."""
    _schedules[name] = (func, cron)


def extra_schedules() -> dict[str, tuple[str, str]]:
    """Return the schedules registered by higher apps: `{name: (func, cron)}`."""
    return dict(_schedules)


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
