"""The private Django names the fast path touches still exist and still read as they did (issue 27 item 3).

`agents_site/django_private.py` lists them; a Django upgrade that renames one or changes the
source of a method we override or re-implement fails here, naming it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from pathlib import Path

import django
import pytest

from agents_site.django_private import DJANGO_VERSION, NAMES

ROOT = Path(__file__).resolve().parents[2]


def _resolve(path: str):
    module, qualified = path.split(":")
    owner, *rest = qualified.split(".")
    obj = getattr(importlib.import_module(module), owner)
    for part in rest:
        if not hasattr(obj, part):
            # An attribute Django's class sets on its instances (`self.async_mode = …`).
            assert inspect.isclass(obj) and re.search(rf"self\.{re.escape(part)}\b", inspect.getsource(obj)), f"{path} is gone"
            return None
        obj = getattr(obj, part)
    return inspect.unwrap(getattr(obj, "__func__", obj))  # Django's own, under tests/conftest.py's wrappers


def test_the_list_was_read_from_the_pinned_django():
    assert django.get_version() == DJANGO_VERSION
    assert f"Django=={DJANGO_VERSION}" in (ROOT / "requirements.txt").read_text().splitlines()


@pytest.mark.parametrize("name", NAMES, ids=[n.path for n in NAMES])
def test_each_private_name_exists_and_its_source_is_unchanged(name):
    obj = _resolve(name.path)
    assert (ROOT / name.part).is_file()
    if name.how in ("overrides", "reimplements"):
        assert obj is not None
        digest = hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()
        assert digest == name.source_sha256, f"Django changed {name.path}: port the change into {name.part}, then update the hash"


def test_every_private_method_our_subclasses_override_is_listed():
    """A new override of a Django `_name` in the fast path must be added to the list."""
    listed = {n.path.rsplit(".", 1)[1] for n in NAMES}
    for part in ("server/asgi.py", "server/inline_middleware.py", "agents_site/db_backends/sqlite3/base.py"):
        source = (ROOT / part).read_text()
        for name in re.findall(r"^    (?:async )?def (_[a-z]\w*)\(", source, flags=re.M):
            if name.startswith("__"):
                continue
            ours = name in ("_pool_key_for", "_release_write_lock", "_serve_in_thread", "_serve_sync_view", "_sync_view_match", "_shared_executor", "_done")
            assert ours or name in listed, f"{part} overrides Django's private {name}: list it in agents_site/django_private.py"
