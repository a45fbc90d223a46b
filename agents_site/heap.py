"""A long-lived process's heap, settled once when it starts serving (issue 26 item 2).

CPython's oldest-generation collection walks every tracked object of the process. A daphne
process holds a few hundred thousand of them after start-up (Django, Ninja, DRF, pydantic, the
URLconf and every view module): each full collection paused the event loop 115–187 ms, and one
in the writer process as long — the fan-out's p99 (100 streams, 200 events/s) was that pause
(BENCHMARKS.md, "Fan-out": p99 175 ms with it, 72 ms without).

`settle()` imports every view module (the URLconf), collects once and moves every object that
survived into the permanent generation (`gc.freeze()`), which no collection walks again. What
the process allocates later is still collected as before; only start-up's objects are left
alone, and they live for the whole process anyway. A process forked after the freeze (django-q2's
workers) also keeps those pages shared with its parent: a collection no longer writes to them.

Called by the ASGI entry point (`agents_site.asgi`) and `manage.py qcluster` before its
workers fork. `AGENTS_GC_FREEZE=0` turns it off.
"""

from __future__ import annotations

import gc

from django.conf import settings
from django.urls import get_resolver


def settle() -> bool:
    """Import the URLconf, collect, and freeze what survived; return True if it froze.

    Returns False (and does nothing) when `AGENTS_GC_FREEZE` is off. Takes ≈ 0.1–0.3 s of CPU
    once (the full collection). Raises nothing of its own.
    """
    if not getattr(settings, "AGENTS_GC_FREEZE", True):
        return False
    get_resolver().url_patterns  # noqa: B018 — imports every view module before the freeze
    gc.collect()
    gc.freeze()
    return True
