"""The rules decided with the permission table (issue 50 item 1): what a plain member may do.

A member stops only runs they started; the ledger is admin-only; machines are registered by
admins; the metrics, activity and approvals lists show a member their own runs. Each refusal is
the error shape and stores nothing; another org's object answers exactly like an unknown id.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agents_site.ids import mint_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def member_a(org_a):
    """A plain member of org_a: `(user, client with their API key, actor)`."""
    from tenancy.services import api_key_create, membership_set

    membership = membership_set(org=org_a.org, username=f"bob-{org_a.slug}", password="pw", is_admin=False)
    _, key = api_key_create(org=org_a.org, user=membership.user)
    return membership.user, Client(HTTP_AUTHORIZATION=f"Bearer {key}"), f"{org_a.slug}/{membership.user.username}"


def _admin_actor(org) -> str:
    return f"{org.slug}/{org.user.username}"


def _session(org, actor: str) -> str:
    from sessions.services import session_create

    with org.context():
        return session_create(agent="probe", actor=actor).id


def _run(org, actor: str, *, agent_name: str = "probe", minutes_ago: int = 5):
    from runs.models import Run

    at = timezone.now() - timedelta(minutes=minutes_ago)
    with org.context():
        return Run.objects.create(id=mint_id("run"), agent_name=agent_name, status="ok", model="m", actor=actor,
                                  created_at=at, started_at=at, finished_at=at)


def _control_events(org, session_id: str) -> int:
    from sessions.models import Event

    with org.context():
        return Event.objects.filter(session_id=session_id, kind="control").count()


def test_a_member_cannot_stop_a_run_someone_else_started(org_a, member_a):
    _, member, _ = member_a
    session_id = _session(org_a, _admin_actor(org_a))
    response = member.post(f"/v1/agents/sessions/{session_id}/stop", "{}", content_type="application/json")
    assert response.status_code == 403
    assert response.json() == {"status": 403, "code": "forbidden", "error": "only the user who started the run or an org admin may stop it"}
    assert _control_events(org_a, session_id) == 0


def test_a_member_stops_their_own_run_and_an_admin_stops_anyones(org_a, member_a):
    _, member, actor = member_a
    own = _session(org_a, actor)
    assert member.post(f"/v1/agents/sessions/{own}/stop", "{}", content_type="application/json").status_code == 200
    theirs = _session(org_a, actor)
    assert org_a.client.post(f"/v1/agents/sessions/{theirs}/stop", "{}", content_type="application/json").status_code == 200


def test_stopping_another_orgs_run_is_the_same_404_as_an_unknown_one(org_a, org_b):
    session_id = _session(org_a, _admin_actor(org_a))
    foreign = org_b.client.post(f"/v1/agents/sessions/{session_id}/stop", "{}", content_type="application/json")
    unknown = org_b.client.post("/v1/agents/sessions/ses_unknown/stop", "{}", content_type="application/json")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.json() == unknown.json()
    assert _control_events(org_a, session_id) == 0


def test_the_ledger_is_admin_only(org_a, member_a):
    _, member, _ = member_a
    refused = member.get("/v1/agents/billing")
    assert refused.status_code == 403
    assert refused.json() == {"status": 403, "code": "forbidden", "error": "only an org admin reads the ledger"}
    assert org_a.client.get("/v1/agents/billing").status_code == 200


def test_machines_are_registered_by_admins(org_a, member_a):
    from targets.models import Target

    _, member, _ = member_a
    body = '{"label": "box", "host": "box-1"}'
    refused = member.post("/v1/agents/targets", body, content_type="application/json")
    assert refused.status_code == 403
    assert refused.json() == {"status": 403, "code": "forbidden", "error": "only an org admin registers machines"}
    with org_a.context():
        assert Target.objects.count() == 0
    assert org_a.client.post("/v1/agents/targets", body, content_type="application/json").status_code == 201


def test_metrics_and_activity_show_a_member_their_own_runs(org_a, member_a):
    _, member, actor = member_a
    _run(org_a, actor, agent_name="mine")
    _run(org_a, _admin_actor(org_a), agent_name="theirs")
    _run(org_a, _admin_actor(org_a), agent_name="theirs")

    series = {s["key"]: sum(p["v"] for p in s["points"]) for s in member.get("/v1/agents/metrics?range=24h").json()["series"]}
    assert series == {"mine": 1}
    series = {s["key"]: sum(p["v"] for p in s["points"]) for s in org_a.client.get("/v1/agents/metrics?range=24h").json()["series"]}
    assert series == {"mine": 1, "theirs": 2}

    run_rows = [r["agent"] for r in member.get("/v1/agents/activity").json()["activity"] if r["kind"] in ("invoked", "failed")]
    assert run_rows == ["mine"]
    run_rows = [r["agent"] for r in org_a.client.get("/v1/agents/activity").json()["activity"] if r["kind"] in ("invoked", "failed")]
    assert sorted(run_rows) == ["mine", "theirs", "theirs"]


def test_the_approvals_list_shows_a_member_their_own_runs(org_a, member_a):
    from runs.models import Approval

    _, member, actor = member_a
    mine, theirs = _run(org_a, actor), _run(org_a, _admin_actor(org_a))
    with org_a.context():
        for run in (mine, theirs):
            Approval.objects.create(id=mint_id("apr"), run_id=run.id, session_id="ses_x", tool_call_id=f"call-{run.id}",
                                    tool_name="echo", created_at=timezone.now())
    assert [a["runId"] for a in member.get("/v1/agents/approvals").json()["approvals"]] == [mine.id]
    assert sorted(a["runId"] for a in org_a.client.get("/v1/agents/approvals").json()["approvals"]) == sorted([mine.id, theirs.id])


def test_key_register_refuses_a_foreign_and_an_unknown_agent_id_alike(org_a, org_b):
    """The agent-token route answers one 403 for a sibling's id, another org's id and an unknown id."""
    from tests.identity.conftest import AgentKeys, bearer, create_agent, post

    agent_keys = AgentKeys()
    mine = create_agent(org_a.client, display_name="Mine").json()
    sibling = create_agent(org_a.client, display_name="Sibling").json()
    foreign = create_agent(org_b.client, display_name="Foreign").json()
    answers = [post(org_a.client, f"/v1/identity/agents/{ref}/keys/register", agent_keys.body(webhook=False), **bearer(mine["agent_token"]))
               for ref in (sibling["agent_id"], foreign["agent_id"], "agt_unknown_0000", "nobody_here")]
    assert {a.status_code for a in answers} == {403}
    assert len({a.content for a in answers}) == 1, [a.content for a in answers]
    assert answers[0].json() == {"status": 403, "code": "forbidden", "error": "an agent token acts only for its own agent"}


def test_one_sessions_approvals_are_listed_to_any_member(org_a, member_a):
    """A member reads any session of the org; its approvals come with it (the console shows who may answer)."""
    from runs.models import Approval

    _, member, _ = member_a
    theirs = _run(org_a, _admin_actor(org_a))
    with org_a.context():
        Approval.objects.create(id=mint_id("apr"), run_id=theirs.id, session_id="ses_theirs", tool_call_id="call-1",
                                tool_name="echo", created_at=timezone.now())
    assert [a["runId"] for a in member.get("/v1/agents/approvals?session=ses_theirs").json()["approvals"]] == [theirs.id]
