"""PostgreSQL org mode backups (issue 35 item 3) against the real server on 127.0.0.1:5432:
`backup_org_pg` dumps one org's database, `restore_org` brings it back to a moment."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from agents.models import Agent
from sessions.models import Event
from tenancy import stores
from tenancy.backups import postgres
from tenancy.backups.restore import POSITION_EPOCH, RestoreError, restore_org
from tenancy.models import OrgRestore
from tenancy.services import org_create


def _agent(name: str) -> None:
    now = timezone.now()
    Agent.objects.create(id=f"agent_{name}", name=name, created_at=now, updated_at=now)


def test_one_org_is_dumped_and_restored_to_a_moment_the_other_untouched(postgres_orgs, settings, tmp_path, transactional_db):
    settings.AGENTS_BACKUP_URL = str(tmp_path / "backups")
    slugs = ["pgdrill-a", "pgdrill-b"]
    postgres_orgs.extend(slugs)
    for slug in slugs:
        org_create(slug=slug)
        with stores.org_context(slug):
            _agent("before")
    with pytest.raises(RestoreError, match="has no dump yet"):
        restore_org("pgdrill-a")
    first = postgres.backup("pgdrill-a")
    assert first.exists() and first.read_bytes()[:5] == b"PGDMP"  # pg_dump's custom format
    moment = timezone.now()
    for slug in slugs:
        with stores.org_context(slug):
            _agent("after")
    with pytest.raises(RestoreError, match="before the first snapshot"):
        restore_org("pgdrill-a", moment - dt.timedelta(hours=1))
    record = restore_org("pgdrill-a", moment)
    assert record.position_floor == POSITION_EPOCH and OrgRestore.objects.get(pk=record.pk).status == "done"
    with stores.org_context("pgdrill-a"):
        assert sorted(Agent.objects.values_list("name", flat=True)) == ["before"]
        assert Event.objects.count() == 0
    with stores.org_context("pgdrill-b"):
        assert sorted(Agent.objects.values_list("name", flat=True)) == ["after", "before"]


def test_the_command_refuses_outside_postgres_mode(settings, tmp_path, db):
    settings.AGENTS_BACKUP_URL = str(tmp_path)
    with pytest.raises(CommandError, match="AGENTS_ORG_DATABASE=postgres"):
        call_command("backup_org_pg", "anything")


def _served_again(org, timeout: float = 10.0) -> None:
    """Wait until the org answers 200 again: each process trusts its last reading of the restore
    flag for up to `fence.PG_FLAG_TTL_SECONDS`, so the 503 may outlive the restore that long."""
    import time

    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}", raise_request_exception=False)
    deadline = time.monotonic() + timeout
    while (status := client.get("/v1/agents/sessions").status_code) != 200:
        assert status == 503 and time.monotonic() < deadline, status
        time.sleep(0.05)


def test_during_a_pg_restore_only_its_org_answers_503_and_a_failed_restore_changes_nothing(
        postgres_orgs, make_org, settings, tmp_path, transactional_db):
    import io
    from pathlib import Path

    settings.AGENTS_BACKUP_URL = str(tmp_path / "backups")
    org_a, org_b = make_org("pga"), make_org("pgb")
    postgres_orgs.extend([org_a.slug, org_b.slug])
    with pytest.raises(CommandError, match="unknown org 'pg-nope'"):
        call_command("backup_org_pg", "pg-nope")
    with stores.org_context(org_a.slug):
        _agent("before")
    out = io.StringIO()
    call_command("backup_org_pg", org_a.slug, stdout=out)
    dump = Path(out.getvalue().strip())
    assert dump.parent == tmp_path / "backups" / "pg" / org_a.slug and dump.read_bytes()[:5] == b"PGDMP"
    with stores.org_context(org_a.slug):
        _agent("after")

    answered = {}

    def say(line: str) -> None:
        if "is offline" in line:
            from django.test import Client

            answered["a"] = Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}", raise_request_exception=False).get("/v1/agents/sessions")
            answered["b"] = org_b.client.get("/v1/agents/sessions").status_code

    restore_org(org_a.slug, say=say)
    assert answered["a"].status_code == 503 and answered["a"].json()["condition"] == "restoring"
    assert answered["a"].json()["code"] == "store_unavailable" and answered["b"] == 200
    _served_again(org_a)
    with stores.org_context(org_a.slug):
        assert sorted(Agent.objects.values_list("name", flat=True)) == ["before"]

    # A newer dump that pg_restore cannot read: the cause named, the database as it was.
    with stores.org_context(org_a.slug):
        _agent("kept")
    broken = dump.with_name((timezone.now() - dt.timedelta(seconds=1)).strftime("%Y%m%dT%H%M%S%fZ") + ".dump")
    broken.write_bytes(b"PGDMP this is not a dump")
    with pytest.raises(RestoreError, match=f"pg_restore could not read {broken}"):
        restore_org(org_a.slug)
    with stores.org_context(org_a.slug):
        assert sorted(Agent.objects.values_list("name", flat=True)) == ["before", "kept"]
    assert OrgRestore.objects.filter(slug=org_a.slug, status="failed").count() == 1
    _served_again(org_a)
