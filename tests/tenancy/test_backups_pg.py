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
