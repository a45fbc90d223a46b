"""webhooks.queries (issue 27 item 3, issue 26 item 4): the finish's one read of where a run's
`run.finished` goes, on SQLite and PostgreSQL, reading back what the ORM would."""

from __future__ import annotations

import pytest
from django.utils import timezone

from tenancy import stores
from webhooks import queries
from webhooks.models import Endpoint, RunCallback

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _endpoint(n: int, *, enabled: bool = True, events=("run.finished",)) -> Endpoint:
    now = timezone.now()
    return Endpoint.objects.create(public_id=f"ep_q{n}", url=f"https://hooks.example/{n}", events=list(events), enabled=enabled,
                                   secret_encrypted="x", created_at=now, updated_at=now)


def test_enabled_endpoints_come_newest_first_with_the_runs_own_callback(org_a):
    with org_a.context():
        older = _endpoint(1, events=["run.finished", "balance.low"])
        _endpoint(2, enabled=False)
        newer = _endpoint(3, events=[])
        RunCallback.objects.create(run_id="run_mine", endpoint=older, url="https://hooks.example/own", created_at=timezone.now())
        alias = stores.current_alias()

        mine = queries.enabled_endpoints_with_callback("run_mine", alias)
        assert [(e.public_id, e.callback_url) for e in mine] == [("ep_q3", None), ("ep_q1", "https://hooks.example/own")]
        assert [(e.public_id, e.callback_url) for e in queries.enabled_endpoints_with_callback("run_other", alias)] == [
            ("ep_q3", None), ("ep_q1", None)]
        read = mine[1]  # every field as the ORM reads it: JSON a list, booleans, dates, the loaded state
        stored = Endpoint.objects.get(pk=older.pk)
        assert [getattr(read, f.attname) for f in Endpoint._meta.concrete_fields] == [
            getattr(stored, f.attname) for f in Endpoint._meta.concrete_fields]
        assert read.events == ["run.finished", "balance.low"] and read.enabled is True and read._state.db == alias
        assert not read._state.adding and mine[0].pk == newer.pk


def test_no_enabled_endpoint_reads_nothing(org_a):
    with org_a.context():
        _endpoint(1, enabled=False)
        assert queries.enabled_endpoints_with_callback("run_mine", stores.current_alias()) == []
