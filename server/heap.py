"""A long-lived process's heap, settled once when it starts serving (issue 26 item 2).

CPython's oldest-generation collection walks every tracked object of the process. A process that
imported the site (Django, Ninja, DRF, pydantic, the URLconf and every view module) tracks about
225,000 of them, and each full collection walks them all: `bench/heap.py` measured 122 ms per
full collection on this 2-core machine (load average 3), a pause of daphne's event loop.

`settle()` imports every view module (the URLconf), collects once and moves every object that
survived into the permanent generation (`gc.freeze()`), which no collection walks again. What
the process allocates later is still collected as before; only start-up's objects are left
alone, and they live for the whole process anyway (after the freeze the bench's full collection
walks nothing of them: 0.0 ms). A process forked after the freeze (django-q2's workers) inherits
the frozen set: its collections do not walk those objects either (their reference counts still
change, so the pages are not kept shared).

Called by the ASGI entry point (`server.asgi`) and `manage.py qcluster` before its
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
