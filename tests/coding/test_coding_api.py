"""POST /v1/agents/coding: admission rules, answered before anything runs (issue 14 item 2)."""

from __future__ import annotations

import pytest

from runs.models import Run
from coding.models import CodingRun
from tests.coding.conftest import fund, register, start
from tests.support.task_queue import task_queue  # noqa: F401  (fixture)

pytestmark = pytest.mark.both_stores


def _runs(org) -> list[Run]:
    with org.context():
        return list(Run.objects.all())


def test_start_answers_202_with_the_handle_and_queues_the_task(shop, upstream, task_queue):

    response = start(shop, project="shop-site")
    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"sessionId", "runId", "branch", "repo", "routed", "targetId"}
    assert body["routed"] is False and body["targetId"] == ""
    [run] = _runs(shop)
    assert run.status == "queued" and run.kind == "coding" and run.fee_cents == 100 and run.session_id == body["sessionId"]
    queued = [t for t in task_queue.tasks() if t.get("func") == "coding.tasks.execute_coding_run"]
    assert [t["args"] for t in queued] == [(shop.slug, body["runId"])]
    session = shop.client.get(f"/v1/agents/sessions/{body['sessionId']}").json()
    assert session["repo"] == "acme/shop" and session["project"] == "shop-site"


def test_unsupported_tool_is_400_naming_the_supported_ones(shop, upstream):
    response = start(shop, tool="claude")
    assert response.status_code == 400 and "supported: dev" in response.json()["error"]
    assert _runs(shop) == []


def test_repo_of_another_org_is_404(shop, org_b, upstream):
    fund(org_b)
    response = start(org_b)
    assert response.status_code == 404 and response.json()["error"] == "repo not found"
    assert _runs(org_b) == []


@pytest.mark.parametrize("body, fragment", [
    ({"prompt": ""}, "prompt is required"),
    ({"base": "-evil"}, "base is not a valid branch name"),
    ({"timeoutSeconds": 0}, "timeoutSeconds"),
    ({"repo": "nope"}, "repo not found"),
])
def test_bad_input_is_refused_and_nothing_stored(shop, upstream, body, fragment):
    response = start(shop, **body)
    assert response.status_code in (400, 404) and fragment in response.json()["error"]
    assert _runs(shop) == []


def test_after_must_be_a_coding_run_of_the_org(shop, upstream):
    response = start(shop, after="sess_" + "0" * 32)
    assert response.status_code == 404 and "after" in response.json()["error"]


def test_more_runs_than_the_limit_in_flight_is_429(shop, upstream, settings):
    settings.AGENTS_CODING_MAX_CONCURRENT = 2
    assert start(shop).status_code == 202
    assert start(shop).status_code == 202
    response = start(shop)
    assert response.status_code == 429 and response.json()["code"] == "coding_busy"
    assert len(_runs(shop)) == 2


def test_no_inference_here_is_503_and_nothing_is_stored(shop, settings):
    # The coding kind's policy gates it inside run_starting like every kind (issue 48 item 2).
    settings.INFERENCE_BASE_URL = ""
    response = start(shop)
    assert response.status_code == 503 and response.json()["code"] == "inference_unavailable"
    assert _runs(shop) == []
    with shop.context():
        assert CodingRun.objects.count() == 0


def test_no_sandbox_is_503_never_unconfined(shop, upstream, settings):
    settings.AGENTS_CODING_SANDBOX = "none"
    response = start(shop)
    assert response.status_code == 503 and response.json()["code"] == "sandbox_unavailable"
    assert _runs(shop) == []


def test_unfunded_org_is_402(org_a, remote, upstream):
    assert register(org_a, remote).status_code == 201
    response = start(org_a)
    assert response.status_code == 402 and response.json()["code"] == "insufficient_balance"
    assert _runs(org_a) == []


def test_coding_fee_is_its_own_setting(shop, upstream, settings):
    settings.AGENTS_CODING_FEE_CENTS = 250
    assert start(shop).status_code == 202
    assert _runs(shop)[0].fee_cents == 250


def test_read_a_coding_run(shop, upstream, org_b):
    body = start(shop).json()
    response = shop.client.get(f"/v1/agents/coding/{body['runId']}")
    assert response.status_code == 200 and response.json()["branch"] == body["branch"] and response.json()["status"] == "queued"
    assert org_b.client.get(f"/v1/agents/coding/{body['runId']}").status_code == 404


def test_stop_before_start_cancels_without_running(shop, upstream):
    from tests.coding.conftest import execute

    body = start(shop).json()
    stopped = shop.client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", {}, content_type="application/json")
    assert stopped.status_code in (200, 202), stopped.content
    assert execute(shop, body["runId"]) == "error"
    assert upstream.chat_requests == []
    with shop.context():
        assert CodingRun.objects.get(pk=body["runId"]).pushed is False


@pytest.mark.django_db(transaction=True)
def test_simultaneous_starts_never_pass_the_limit(shop, upstream, settings):
    # The limit is a count then an insert: on PostgreSQL (READ COMMITTED) two starts counted the
    # same free slot unless the count is made under the org's serialisation.
    import json
    import threading

    from django.db import connections
    from django.test import Client

    settings.AGENTS_CODING_MAX_CONCURRENT = 2
    barrier = threading.Barrier(6, timeout=30)
    answers: list[tuple[int, str]] = []

    def go() -> None:
        try:
            client = Client(HTTP_AUTHORIZATION=f"Bearer {shop.key}")
            barrier.wait()
            response = client.post("/v1/agents/coding", json.dumps({"repo": "acme/shop", "prompt": "add a test"}),
                                   content_type="application/json")
            answers.append((response.status_code, response.json().get("code", "")))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=go, daemon=True) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert sorted(answers) == [(202, "")] * 2 + [(429, "coding_busy")] * 4
    assert len(_runs(shop)) == 2
    with shop.context():
        assert CodingRun.objects.count() == 2
