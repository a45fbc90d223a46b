"""The admin shows the acting org's schedules: next fire time, last outcome, backoff state."""

from __future__ import annotations

import re

from django.contrib.admin.utils import quote
from django.test import Client

from runs.models import Run
from agents.scheduling.ticker import tick_org
from agents_site.vocabulary import RunStatus
from tests.agents.conftest import utc


def _admin_client(org) -> Client:
    client = Client()
    client.force_login(org.user)
    return client


def test_admin_lists_schedules_with_next_fire_last_outcome_and_backoff(org_a, org_b, scheduled_agent):
    scheduled_agent(org_a, name="nightly", schedule="0 0 * * *", tz="America/Los_Angeles", at=utc(2026, 1, 10, 9, 0))
    scheduled_agent(org_b, name="other-org", schedule="* * * * *", at=utc(2026, 1, 10, 9, 0))
    with org_a.context():
        report = tick_org(org=org_a.slug, now=utc(2026, 1, 11, 8, 0, 3))
        Run.objects.filter(pk=report.decisions[0].run_id).update(status=RunStatus.ERROR, error="upstream said no", finished_at=utc(2026, 1, 11, 8, 0, 9))
        tick_org(org=org_a.slug, now=utc(2026, 1, 11, 8, 1, 3))  # settles the failed run

    response = _admin_client(org_a).get("/admin/agents/scheduledagent/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "nightly" in page and "other-org" not in page
    assert "America/Los_Angeles" in page
    assert re.search(r'class="field-next_fire">\d{4}-\d\d-\d\dT0[78]:00:00Z<', page)  # midnight in Los Angeles
    assert 'class="field-last_outcome">error<' in page
    assert 'class="field-fail_streak">1<' in page and 'class="field-backoff">1<' in page  # one slot to skip


def test_admin_schedule_detail_shows_recent_slots(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, name="every5", schedule="*/5 * * * *", at=utc(2026, 1, 10, 12, 30))
    with org_a.context():
        tick_org(org=org_a.slug, now=utc(2026, 1, 10, 12, 35, 1))

    response = _admin_client(org_a).get(f"/admin/agents/scheduledagent/{quote(agent.pk)}/change/")

    assert response.status_code == 200
    assert "2026-01-10T12:35:00Z fired run_" in response.content.decode()


def test_a_plain_member_cannot_open_the_schedules_admin(make_org):
    member = make_org("m", admin=False)

    response = _admin_client(member).get("/admin/agents/scheduledagent/")

    assert response.status_code == 302  # to the admin login
