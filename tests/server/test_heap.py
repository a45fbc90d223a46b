"""server.heap: a serving process freezes its start-up objects out of the collector's walks."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from server import heap
from tests.support.live import ROOT, server_env


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_settle_freezes_what_survived_a_collection(settings, unfrozen):
    settings.AGENTS_GC_FREEZE = True
    assert gc.get_freeze_count() == 0
    assert heap.settle() is True
    assert gc.get_freeze_count() > 10_000  # Django, the URLconf and every view module


def test_settle_does_nothing_when_turned_off(settings, unfrozen):
    settings.AGENTS_GC_FREEZE = False
    assert heap.settle() is False
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(("flag", "frozen"), [("1", True), ("0", False)])
def test_the_asgi_entry_point_settles_the_heap_it_serves_from(flag, frozen):
    probe = "import gc, server.asgi; print(gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=server_env({"AGENTS_GC_FREEZE": flag}),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (int(out.stdout.split()[-1]) > 10_000) is frozen
