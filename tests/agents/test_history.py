"""History and dashboards: per-agent and org-wide runs, activity feed, invocations metrics."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from agents.dashboards import invocation_metrics
from runs.models import Run
from agents_site.vocabulary import RunStatus
from tenancy import stores
from tests.agents.conftest import make_agent, run
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db


def add_runs(org, agent: dict, count: int, *, status=RunStatus.OK, start=None, step=timedelta(minutes=1)) -> list[str]:
    """Store `count` finished runs of `agent`, one `step` apart from `start` (default: an hour ago)."""
    start = start or timezone.now() - timedelta(hours=1)
    ids = []
    with org.context():
        for i in range(count):
            at = start + i * step
            run_id = f"run_{agent['name']}_{status}_{i:04d}"
            Run.objects.create(id=run_id, agent_id=agent["id"], agent_name=agent["name"], status=status, model="test-model",
                               input=str(i), error="boom" if status == RunStatus.ERROR else "", created_at=at, finished_at=at)
            ids.append(run_id)
    return ids


def org_queries(org, django_assert_max_num_queries, n):
    return django_assert_max_num_queries(n, connection=connections[stores.open_store(org.slug)])


def test_agent_history_is_newest_first_with_a_bounded_limit(org_a, upstream, django_assert_max_num_queries):
    agent = make_agent(org_a, "hist")
    ids = add_runs(org_a, agent, 60)

    with org_queries(org_a, django_assert_max_num_queries, 3):  # agent by id, by name, its runs
        default = org_a.client.get("/v1/agents/hist/runs").json()["runs"]
    assert [r["id"] for r in default] == ids[::-1][:50]
    assert [r["id"] for r in org_a.client.get("/v1/agents/hist/runs?limit=3").json()["runs"]] == ids[::-1][:3]
    # Departs on purpose from the reference's silent default (docs/decisions/0054-cursor-pagination-clamped-limits.md): below 1
    # is a 400, above the maximum is clamped to it (201 used to answer 50 rows).
    assert org_a.client.get("/v1/agents/hist/runs?limit=0").status_code == 400
    assert len(org_a.client.get("/v1/agents/hist/runs?limit=201").json()["runs"]) == 60
    assert len(org_a.client.get(f"/v1/agents/{agent['id']}/runs?limit=200").json()["runs"]) == 60
    assert default[0] == {"id": ids[-1], "kind": "run", "agent": "hist", "agentId": agent["id"], "status": "ok", "model": "test-model", "input": "59",
                          "durationMs": 0, "createdAt": default[0]["createdAt"]}


def test_agent_history_of_another_org_is_404(org_a, org_b, upstream):
    agent = make_agent(org_a, "mine")
    add_runs(org_a, agent, 1)
    assert org_b.client.get(f"/v1/agents/{agent['id']}/runs").status_code == 404


def test_org_runs_span_agents_and_filter_by_status(org_a, org_b, upstream, django_assert_max_num_queries):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    ok_ids = add_runs(org_a, one, 3)
    err_ids = add_runs(org_a, two, 2, status=RunStatus.ERROR, start=timezone.now() - timedelta(minutes=30))
    add_runs(org_b, make_agent(org_b, "elsewhere"), 4)

    with org_queries(org_a, django_assert_max_num_queries, 1):
        everything = org_a.client.get("/v1/agents/runs").json()["runs"]
    assert [r["id"] for r in everything] == err_ids[::-1] + ok_ids[::-1]
    failed = org_a.client.get("/v1/agents/runs?status=error").json()["runs"]
    assert [(r["id"], r["error"]) for r in failed] == [(i, "boom") for i in err_ids[::-1]]
    assert [r["id"] for r in org_a.client.get("/v1/agents/runs?status=ok&limit=2").json()["runs"]] == ok_ids[::-1][:2]


def test_org_runs_with_an_unknown_status_is_400(org_a):
    response = org_a.client.get("/v1/agents/runs?status=weird")
    assert response.status_code == 400
    assert response.json()["error"] == "status must be one of queued|running|waiting|ok|error"


def test_org_runs_list_in_flight_runs_only_when_asked(org_a, upstream):
    agent = make_agent(org_a, "live")
    with org_a.context():
        Run.objects.create(id="run_live", agent_id=agent["id"], agent_name="live", status=RunStatus.RUNNING, created_at=timezone.now())
    assert org_a.client.get("/v1/agents/runs").json() == {"runs": []}
    assert [r["id"] for r in org_a.client.get("/v1/agents/runs?status=running").json()["runs"]] == ["run_live"]


def test_fixed_paths_keep_answering_beside_an_agent_whose_name_starts_like_them(funded, upstream):
    make_agent(funded, "runs2")  # `runs` itself is reserved (tests/agents/test_names.py)
    run(funded, "runs2")
    assert len(funded.client.get("/v1/agents/runs").json()["runs"]) == 1
    assert funded.client.get("/v1/agents/metrics").json()["range"] == "30d"
    assert len(funded.client.get("/v1/agents/runs2/runs").json()["runs"]) == 1


def test_activity_of_an_empty_org_is_empty(org_a):
    response = org_a.client.get("/v1/agents/activity")
    assert response.status_code == 200 and response.json() == {"activity": []}


def test_activity_merges_runs_and_agent_changes_newest_first(funded, org_b, upstream):
    agent = make_agent(funded, "act")
    ok = run(funded, "act").json()
    upstream.script(Reply(status=400, error_body={"error": {"message": "nope " + "x" * 300}}))
    failed = run(funded, "act").json()
    funded.client.patch("/v1/agents/act", {"description": "changed"}, content_type="application/json")
    with funded.context():
        Run.objects.filter(pk=ok["id"]).update(finished_at=timezone.now() - timedelta(minutes=2))
        Run.objects.filter(pk=failed["id"]).update(finished_at=timezone.now() - timedelta(minutes=1))
        from agents.models import Agent

        Agent.objects.filter(pk=agent["id"]).update(created_at=timezone.now() - timedelta(minutes=3))

    rows = funded.client.get("/v1/agents/activity").json()["activity"]

    assert [(r["id"], r["kind"]) for r in rows] == [
        (f"{agent['id']}:updated", "updated"),
        (failed["id"], "failed"),
        (ok["id"], "invoked"),
        (f"{agent['id']}:created", "created"),
    ]
    assert rows[2]["message"] == "Invoked test-model" and rows[0]["message"] == "Configuration updated"
    assert rows[1]["message"].startswith("upstream answered 400: nope") and len(rows[1]["message"].encode()) == 200
    assert org_b.client.get("/v1/agents/activity").json() == {"activity": []}


def test_activity_is_capped_at_50(org_a, upstream):
    add_runs(org_a, make_agent(org_a, "many"), 70)
    assert len(org_a.client.get("/v1/agents/activity").json()["activity"]) == 50


def test_metrics_of_an_org_without_runs_has_no_series_and_null_resources(org_a):
    body = org_a.client.get("/v1/agents/metrics?range=24h").json()
    assert body == {"range": "24h", "series": [], "resource": {"cpuVcpuHours": None, "memGbHours": None, "storageIoBytes": None, "costCents": None}}


@pytest.mark.parametrize("given", ["7D", "", "year", " 24h"])
def test_metrics_refuses_a_range_that_is_not_one_of_its_words(org_a, given):
    # The reference falls back to 30 days for any other word; a typo then reads as data.
    response = org_a.client.get("/v1/agents/metrics", {"range": given})
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "range must be 24h|7d|30d"}


@pytest.mark.parametrize(("given", "canonical", "buckets"), [("24h", "24h", 24), ("7d", "7d", 7), ("30d", "30d", 30), (None, "30d", 30)])
def test_metrics_has_one_series_per_agent_with_every_bucket(org_a, upstream, given, canonical, buckets):
    beta, alpha = make_agent(org_a, "beta"), make_agent(org_a, "alpha")
    add_runs(org_a, alpha, 3, start=timezone.now() - timedelta(minutes=30))
    add_runs(org_a, beta, 1, start=timezone.now() - timedelta(minutes=10), status=RunStatus.ERROR)
    add_runs(org_a, beta, 1, start=timezone.now() - timedelta(days=40))  # outside every window

    body = org_a.client.get("/v1/agents/metrics", {"range": given} if given is not None else {}).json()

    assert body["range"] == canonical
    assert [s["key"] for s in body["series"]] == ["alpha", "beta"]
    for series, total in zip(body["series"], (3, 1), strict=True):
        assert len(series["points"]) == buckets
        assert [p["v"] for p in series["points"]] == [0] * (buckets - 1) + [total]
    times = [p["t"] for p in body["series"][0]["points"]]
    assert times == sorted(times) and len(set(times)) == buckets


def test_metrics_buckets_runs_by_when_they_finished(org_a, upstream):
    agent = make_agent(org_a, "spread")
    now = timezone.now()
    add_runs(org_a, agent, 3, start=now - timedelta(hours=23, minutes=30), step=timedelta(hours=11))
    with org_a.context():
        body = invocation_metrics(window="24h", now=now)
    assert [p["v"] for p in body["series"][0]["points"]] == [1] + [0] * 10 + [1] + [0] * 10 + [1, 0]


def test_metrics_are_org_scoped(org_a, org_b, upstream):
    add_runs(org_a, make_agent(org_a, "a"), 2)
    assert org_b.client.get("/v1/agents/metrics").json()["series"] == []


def test_org_runs_filter_by_agent_name_or_id(org_a, upstream, django_assert_max_num_queries):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    one_ids = add_runs(org_a, one, 3)
    add_runs(org_a, two, 2, start=timezone.now() - timedelta(minutes=30))

    with org_queries(org_a, django_assert_max_num_queries, 2):  # the agent, its runs
        by_name = org_a.client.get("/v1/agents/runs?agent=one")
    assert by_name.status_code == 200
    assert [r["id"] for r in by_name.json()["runs"]] == one_ids[::-1]
    assert [r["id"] for r in org_a.client.get(f"/v1/agents/runs?agent={one['id']}").json()["runs"]] == one_ids[::-1]
    assert {r["agent"] for r in org_a.client.get("/v1/agents/runs?agent=two").json()["runs"]} == {"two"}


def test_org_runs_agent_filter_pages_with_its_own_cursor(org_a, upstream):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    one_ids = add_runs(org_a, one, 3)
    add_runs(org_a, two, 2)
    first = org_a.client.get("/v1/agents/runs?agent=one&limit=2").json()
    rest = org_a.client.get(f"/v1/agents/runs?agent=one&limit=2&cursor={first['nextCursor']}").json()
    assert [r["id"] for r in first["runs"] + rest["runs"]] == one_ids[::-1]
    # The cursor belongs to agent one's list: on another agent's or the unfiltered list it is a 400.
    assert org_a.client.get(f"/v1/agents/runs?agent=two&cursor={first['nextCursor']}").status_code == 400
    assert org_a.client.get(f"/v1/agents/runs?cursor={first['nextCursor']}").status_code == 400


def test_org_runs_agent_filter_combines_with_in_flight_status(org_a, upstream):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    with org_a.context():
        for agent in (one, two):
            Run.objects.create(id=f"run_live_{agent['name']}", agent_id=agent["id"], agent_name=agent["name"], status=RunStatus.RUNNING,
                               created_at=timezone.now())
    assert [r["id"] for r in org_a.client.get("/v1/agents/runs?status=running&agent=two").json()["runs"]] == ["run_live_two"]


@pytest.mark.parametrize("value", ["nobody", "", "%20", "x" * 129])
def test_org_runs_with_an_unknown_agent_is_400_in_the_error_shape(org_a, org_b, upstream, value):
    make_agent(org_a, "one")
    response = org_a.client.get(f"/v1/agents/runs?agent={value}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["status"] == 400 and body["code"] == "invalid_request"
    assert "agent" in body["error"]


def test_org_runs_refuse_another_orgs_agent_as_a_filter(org_a, org_b, upstream):
    theirs = make_agent(org_b, "theirs")
    add_runs(org_b, theirs, 1)
    response = org_a.client.get(f"/v1/agents/runs?agent={theirs['id']}")
    assert response.status_code == 400
    assert response.json()["error"] == "agent must name an agent of this org (its id or name)"


def test_openapi_declares_the_org_runs_agent_filter(client):
    document = client.get("/v1/agents/openapi.json").json()
    operation = next(op for path, item in document["paths"].items() if path.endswith("/agents/runs") for op in item.values())
    agent = next(p for p in operation["parameters"] if p["name"] == "agent")
    assert agent["in"] == "query" and agent["required"] is False
    assert agent["schema"]["type"] == "string" and agent["schema"]["maxLength"] == 128
    assert "by id or name" in agent["description"]
