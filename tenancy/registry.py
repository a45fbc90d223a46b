"""The org aliases registered in `connections.settings`: a bounded LRU that never drops a busy one.

Django walks every registered alias twice per request (`reset_queries`, `close_old_connections`),
so the number kept registered is capped (`AGENTS_STORE_CACHE_SIZE`) to keep a request's cost
independent of how many orgs the process has served. `connections.settings` is replaced, never
mutated, so a thread walking it is never broken; an alias some thread acts for (`hold`) is never
evicted. An evicted alias's connections, and its pool in PostgreSQL mode, are closed. This
module deals in aliases only; `tenancy.stores` turns orgs into them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter, OrderedDict

from django.conf import settings
from django.db import connections

#: Every org alias starts with this; the org template's temporary aliases with `TEMPLATE_PREFIX`.
ALIAS_PREFIX = "org_"
TEMPLATE_PREFIX = "orgtemplate_"

# Guards `_ready`, `_in_use` and every change to `connections.settings`; held only briefly.
lock = threading.RLock()
# Aliases registered for use, least recently used first.
_ready: OrderedDict[str, None] = OrderedDict()
# How many frames of any thread act for each alias right now. Eviction skips these: another
# thread between its router call and `connections[alias]` would otherwise find the alias gone.
_in_use: Counter[str] = Counter()


def is_org_alias(alias: str) -> bool:
    """Return True when `alias` names an org store or the org template (not `default`)."""
    return alias.startswith(ALIAS_PREFIX) or alias.startswith(TEMPLATE_PREFIX)


def register(alias: str, settings_dict: dict) -> None:
    """Add `alias` with `settings_dict` to `connections.settings` (no-op if present).

    Never `connections[alias] = …`: the handler builds a per-thread connection from settings.
    Copy-on-write: a dict grown in place under another thread's iteration raises
    "dictionary changed size during iteration".
    """
    with lock:
        if alias not in connections.settings:
            connections.settings = {**connections.settings, alias: settings_dict}


def unregister(alias: str) -> None:
    """Close this thread's connection of `alias` and the process's pool of it; drop the alias.

    Callers make sure no frame acts for `alias` (see `hold`): its pooled connections end now.
    """
    with lock:
        with contextlib.suppress(Exception):
            connection = connections[alias]
            connection.close()
            close_pool = getattr(connection, "close_pool", None)  # PostgreSQL's wrapper has a pool
            if close_pool is not None:
                close_pool()
        if alias in connections.settings:
            connections.settings = {k: v for k, v in connections.settings.items() if k != alias}
        with contextlib.suppress(AttributeError):
            delattr(connections._connections, alias)


def touch(alias: str) -> bool:
    """Mark `alias` most recently used; return False when it is not registered for use."""
    with lock:
        if alias in _ready:
            _ready.move_to_end(alias)
            return True
        return False


def admit(alias: str, settings_dict: dict) -> None:
    """Register `alias` for use and evict least recently used idle aliases above the cap."""
    with lock:
        if alias in _ready:
            _ready.move_to_end(alias)
            return
        register(alias, settings_dict)
        _ready[alias] = None
        _evict_least_recent(keep=alias)


def evict(alias: str) -> bool:
    """Drop `alias` now unless some frame acts for it; return True when it was dropped."""
    with lock:
        if _in_use[alias]:
            return False
        _ready.pop(alias, None)
        unregister(alias)
        return True


def hold(alias: str) -> bool:
    """Count one more frame acting for `alias`; return False when it is not registered."""
    with lock:
        if alias in _ready:
            _in_use[alias] += 1
            return True
        return False


def let_go(alias: str) -> None:
    """Undo one `hold(alias)`."""
    with lock:
        _in_use[alias] -= 1
        if _in_use[alias] <= 0:
            del _in_use[alias]


def _cache_size() -> int:
    return max(8, int(getattr(settings, "AGENTS_STORE_CACHE_SIZE", 64)))


def _evict_least_recent(*, keep: str) -> None:
    # Caller holds `lock`. An evicted alias is registered again on its next use. Held aliases
    # are never evicted, so the cache may briefly exceed its size while more orgs are busy.
    for alias in list(_ready):
        if len(_ready) <= _cache_size():
            return
        if alias != keep and not _in_use[alias]:
            _ready.pop(alias)
            unregister(alias)
