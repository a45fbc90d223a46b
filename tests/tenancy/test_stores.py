"""One org, one file: provisioning, the fail-closed router, slug checks, the only door."""

import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.db import connections

from agents.models import Agent
from tenancy import stores
from tenancy.db_router import OrgRouter
from tests.support.live import ROOT, server_env


def test_two_orgs_get_two_files(org_a, org_b):
    path_a, path_b = stores.store_path(org_a.slug), stores.store_path(org_b.slug)
    assert path_a.exists() and path_b.exists()
    assert path_a != path_b
    with org_a.context():
        Agent.objects.create(id="agent_x", name="only-in-a", created_at="2026-01-01T00:00Z", updated_at="2026-01-01T00:00Z")
    with org_b.context():
        assert not Agent.objects.filter(name="only-in-a").exists()
    with sqlite3.connect(path_a) as conn:
        assert conn.execute("SELECT name FROM agents_agent").fetchall() == [("only-in-a",)]


def test_router_raises_with_no_org_selected(db):
    with pytest.raises(stores.NoOrgSelected):
        Agent.objects.count()


def test_router_refuses_object_of_another_org(org_a, org_b):
    with org_a.context():
        agent = Agent.objects.create(id="agent_y", name="y", created_at="2026-01-01T00:00Z", updated_at="2026-01-01T00:00Z")
    with org_b.context(), pytest.raises(stores.NoOrgSelected):
        agent.save()


def test_allow_migrate_depends_only_on_db_and_app_label():
    router = OrgRouter()
    assert router.allow_migrate("default", "agents") is False
    assert router.allow_migrate("default", "tenancy") is True
    assert router.allow_migrate("org_acme", "agents") is True
    assert router.allow_migrate("org_acme", "agent_sessions") is True
    assert router.allow_migrate("org_acme", "auth") is False


@pytest.mark.parametrize("slug", ["../x", "A", "", "x" * 4096, "a/b", "-lead", "a b", "a.b", "é"])
def test_invalid_slugs_are_refused_before_any_path(slug, settings):
    before = set((Path(settings.AGENTS_DATA_DIR) / "orgs").glob("*"))
    with pytest.raises(stores.InvalidOrg):
        stores.open_store(slug)
    with pytest.raises(stores.InvalidOrg):
        stores.store_path(slug)
    assert set((Path(settings.AGENTS_DATA_DIR) / "orgs").glob("*")) == before


def test_non_creating_resolver_never_creates(db, settings):
    slug = "never-made-org"
    with pytest.raises(stores.StoreMissing):
        stores.open_existing_store(slug)
    with pytest.raises(stores.StoreMissing):
        stores.open_existing_store("../etc")
    assert not stores.store_path(slug).exists()


def _check_store(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "agents_agent" in tables and "agents_run" in tables


def test_eight_threads_provisioning_one_new_org_leave_one_good_file(db):
    slug = "race-threads"
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker():
        try:
            barrier.wait()
            with stores.org_context(slug):
                Agent.objects.count()
            connections.close_all()
        except BaseException as exc:  # noqa: BLE001 — collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    path = stores.store_path(slug)
    _check_store(path)
    leftovers = [p.name for p in path.parent.iterdir() if p.name.startswith(".agents.db.")]
    assert leftovers == []


def test_processes_provisioning_one_new_org_leave_one_good_file(db, settings):
    slug = "race-procs"
    stores.template_path()  # built once per code version; the race is over the org file
    script = (
        "import django; django.setup()\n"
        "from tenancy import stores\n"
        "from agents.models import Agent\n"
        f"with stores.org_context({slug!r}):\n"
        "    print(Agent.objects.count())\n"
    )
    env = server_env()
    procs = [subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [r[1][-500:] for r in results]
    assert [r[0].strip() for r in results] == [b"0"] * 4
    _check_store(stores.store_path(slug))


def test_new_org_is_a_copy_of_the_template_not_a_migration(db, settings):
    template = stores.template_path()
    mtime = template.stat().st_mtime_ns
    with stores.org_context("copied-org"):
        Agent.objects.count()
    assert template.stat().st_mtime_ns == mtime
    assert stores.store_path("copied-org").stat().st_size >= template.stat().st_size - 4096


def test_only_stores_module_names_an_org_alias_or_touches_connections():
    offenders = []
    # An alias built anywhere but tenancy/stores.py: f"org_{…}", "org_" + …, the alias prefix.
    alias_pattern = re.compile(r"""f["']org_\{|["']org_["']\s*\+|ALIAS_PREFIX\s*\+""")
    # A store path or a connection touched outside the store package (stores, registry, backends,
    # and the backups of stores: replication and restore replace org files and open them).
    store_pattern = re.compile(r"""["']orgs["']|/orgs/|connections\.settings|connections\[|agents\.db["']""")
    store_package = ("tenancy/stores.py", "tenancy/registry.py", "tenancy/backends/", "tenancy/backups/")
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith((".venv/", "tests/", "bench/", "data/")):
            continue
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if alias_pattern.search(line) and rel != "tenancy/stores.py":
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
            elif store_pattern.search(line) and not rel.startswith(store_package):
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
    assert offenders == []


def test_registered_aliases_are_capped_and_evicted_orgs_still_work(db, settings):
    settings.AGENTS_STORE_CACHE_SIZE = 8
    with stores.org_context("evict-first"):
        Agent.objects.create(id="agent_e", name="kept", created_at="2026-01-01T00:00Z", updated_at="2026-01-01T00:00Z")
    for i in range(20):
        stores.open_store(f"evict-{i}")
    registered = [a for a in connections.settings if a.startswith("org_")]
    assert len(registered) <= 8
    assert "org_evict-first" not in registered
    with stores.org_context("evict-first"):
        assert list(Agent.objects.values_list("name", flat=True)) == ["kept"]


def test_alias_another_thread_acts_for_is_never_evicted(db, settings):
    # The evicting thread used to protect only its own current org: a busy org of another
    # thread was dropped from connections.settings under it (ConnectionDoesNotExist).
    settings.AGENTS_STORE_CACHE_SIZE = 8
    entered, evicted = threading.Event(), threading.Event()
    seen: list[object] = []

    def busy():
        with stores.org_context("evict-busy") as alias:
            entered.set()
            evicted.wait(timeout=30)
            try:
                with connections[alias].cursor() as cursor:
                    cursor.execute("SELECT count(*) FROM agents_agent")
                    seen.append(cursor.fetchone()[0])
            except Exception as exc:  # noqa: BLE001 — collected for the assertion
                seen.append(exc)
            finally:
                connections[alias].close()

    thread = threading.Thread(target=busy)
    thread.start()
    assert entered.wait(timeout=30)
    try:
        for i in range(20):
            stores.open_store(f"evict-other-{i}")
        assert "org_evict-busy" in connections.settings
    finally:
        evicted.set()
        thread.join(timeout=30)
    assert seen == [0]
    for i in range(20):  # once nobody acts for it, it is an ordinary LRU entry again
        stores.open_store(f"evict-later-{i}")
    assert "org_evict-busy" not in connections.settings


def test_org_atomic_is_a_transaction_on_the_current_org_store(org_a):
    from django.db import transaction

    with pytest.raises(stores.NoOrgSelected), stores.org_atomic():
        pass
    with org_a.context() as alias, stores.org_atomic():
        assert transaction.get_connection(alias).in_atomic_block


def test_registering_stores_never_breaks_a_thread_walking_the_connections(db, settings):
    # Django walks connections.settings around every request (connections.all()); growing or
    # shrinking that dict in place under another thread raised "dictionary changed size".
    settings.AGENTS_STORE_CACHE_SIZE = 8
    stop = threading.Event()
    errors: list[BaseException] = []

    def walker():
        while not stop.is_set():
            try:
                connections.all(initialized_only=True)
                list(connections)
            except RuntimeError as exc:
                errors.append(exc)
                return

    thread = threading.Thread(target=walker)
    thread.start()
    try:
        for i in range(400):
            stores.open_store(f"walk-{i % 24}")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert errors == []
