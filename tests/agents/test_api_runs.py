"""POST /v1/agents/{ref}/run against the real loopback upstream: order, gate, debit, 502."""

from __future__ import annotations

import pytest

from runs.models import Run
from agents_site.vocabulary import RunStatus
from billing.models import Account
from tests.agents.conftest import debits, fund, make_agent, run, stored_runs
from tests.billing.conftest import ledger_refused
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def test_run_answers_the_recorded_run_and_debits_once(funded, upstream):
    agent = make_agent(funded, "writer", instructions="Be brief.")
    upstream.script(Reply(content="Hi there", prompt_tokens=12, completion_tokens=3))

    response = run(funded, agent["id"], "  say hi  ")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["output"] == "Hi there" and body["model"] == "test-model"
    assert body["input"] == "  say hi  " and body["agent"] == "writer"
    assert body["promptTokens"] == 12 and body["completionTokens"] == 3 and body["attempts"] == 1
    assert body["finishReason"] == "stop"
    assert body["actor"] == f"{funded.slug}/{funded.user.username}"
    assert len(body["traceId"]) == 32 and body["id"].startswith("run_")
    sent = upstream.chat_requests[0]
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "say hi"}]
    assert "tools" not in sent
    [stored] = stored_runs(funded)
    assert (stored.id, stored.status, stored.output, stored.finished_at is not None) == (body["id"], "ok", "Hi there", True)
    [debit] = debits(funded)
    assert (debit.run_id, debit.amount_cents, debit.model, debit.actor) == (body["id"], -100, "test-model", body["actor"])
    assert debit.request_id.startswith("req_")
    assert Account.objects.get(org=funded.org).balance_cents == 900


def test_run_by_name_keeps_the_callers_request_id(funded, upstream):
    make_agent(funded, "named")
    response = run(funded, "named", "x", **{"X-Request-Id": "req-from-client"})
    assert response.status_code == 200
    assert debits(funded)[0].request_id == "req-from-client"


def test_instructions_can_be_sent_as_a_user_turn(funded, upstream, settings):
    settings.AGENTS_INSTRUCTIONS_ROLE = "user"
    make_agent(funded, "quirky", instructions="Rules.")
    assert run(funded, "quirky", "go").status_code == 200
    assert upstream.chat_requests[0]["messages"] == [{"role": "user", "content": "Rules."}, {"role": "user", "content": "go"}]


def test_agent_of_another_org_is_404_and_nothing_moves(funded, org_b, upstream):
    agent = make_agent(funded, "private")
    fund(org_b)

    response = run(org_b, agent["id"])

    assert response.status_code == 404
    assert response.json() == {"status": 404, "code": "not_found", "error": "agent not found"}
    assert upstream.chat_requests == [] and debits(org_b) == [] and debits(funded) == []
    assert stored_runs(funded) == [] and stored_runs(org_b) == []


def test_run_without_principal_is_403(funded, upstream, client):
    make_agent(funded, "guarded")
    response = client.post("/v1/agents/guarded/run", {"input": "x"}, content_type="application/json")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert upstream.chat_requests == [] and stored_runs(funded) == []


def test_input_over_128_kib_is_400_before_inference_or_gate(org_a, upstream, settings):
    make_agent(org_a, "big")
    settings.INFERENCE_BASE_URL = ""  # would be a 503, but the input check comes first
    response = run(org_a, "big", "x" * (128 * 1024 + 1))
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "input too large"}
    assert stored_runs(org_a) == []


def test_input_of_exactly_128_kib_is_accepted(funded, upstream):
    make_agent(funded, "edge")
    assert run(funded, "edge", "é" * (64 * 1024)).status_code == 200


def test_missing_agent_comes_before_input_size(org_a, upstream):
    response = run(org_a, "nobody", "x" * (128 * 1024 + 1))
    assert response.status_code == 404


def test_run_without_inference_is_503_before_the_gate(org_a, upstream, settings):
    make_agent(org_a, "offline")  # org_a is unfunded: a gate would answer 402
    settings.INFERENCE_BASE_URL = ""
    response = run(org_a, "offline")
    assert response.status_code == 503
    assert response.json() == {"status": 503, "code": "inference_unavailable", "error": "inference is not configured on this deployment"}
    assert upstream.chat_requests == [] and stored_runs(org_a) == []


@pytest.mark.parametrize("cents", [0, 1, 99])
def test_underfunded_org_is_402_and_the_model_is_never_called(make_org, upstream, cents):
    org = make_org("poor")
    if cents:
        fund(org, cents)
    make_agent(org, "costly")

    response = run(org, "costly")

    assert response.status_code == 402
    assert response.json() == {
        "status": 402,
        "code": "insufficient_balance",
        "error": "the org's balance cannot pay for this run; add credits",
        "feeCents": 100,
        "balanceCents": cents,
    }
    assert upstream.chat_requests == [] and stored_runs(org) == [] and debits(org) == []


def test_balance_equal_to_the_fee_is_enough(make_org, upstream):
    org = make_org("exact")
    fund(org, 100)
    make_agent(org, "exact")
    assert run(org, "exact").status_code == 200
    assert Account.objects.get(org=org.org).balance_cents == 0


@pytest.fixture
def ledger_unreadable():
    """The ledger really refuses reads (SQLite's authorizer; see tests/billing/conftest.py)."""
    with ledger_refused():
        yield


def test_ledger_that_cannot_answer_is_503_and_nothing_runs(funded, upstream, ledger_unreadable):
    agent = make_agent(funded, "gated")

    response = run(funded, agent["id"])

    assert response.status_code == 503
    assert response.json() == {
        "status": 503,
        "code": "balance_unavailable",
        "error": "billing is temporarily unavailable; the run was not started",
    }
    assert upstream.chat_requests == [] and stored_runs(funded) == []


def test_billing_route_is_503_when_the_ledger_cannot_answer(funded, ledger_unreadable):
    response = funded.client.get("/v1/agents/billing")
    assert response.status_code == 503 and response.json()["code"] == "balance_unavailable"


def test_fee_zero_runs_free_and_ungated(org_a, upstream, settings):
    settings.CLOUD_AGENT_FEE_CENTS = 0
    make_agent(org_a, "free")
    response = run(org_a, "free")
    assert response.status_code == 200 and response.json()["status"] == "ok"
    assert debits(org_a) == [] and Account.objects.get(org=org_a.org).balance_cents == 0


def test_negative_fee_falls_back_to_the_default(org_a, upstream, settings):
    settings.CLOUD_AGENT_FEE_CENTS = -5
    make_agent(org_a, "neg")
    assert run(org_a, "neg").status_code == 402


def test_failed_run_is_502_whose_body_is_the_run_and_is_not_billed(funded, upstream):
    make_agent(funded, "refused")
    upstream.script(Reply(status=400, error_body={"error": {"message": "bad prompt"}}))

    response = run(funded, "refused")

    assert response.status_code == 502
    body = response.json()
    assert body["status"] == "error" and body["error"] == "upstream answered 400: bad prompt"
    assert body["model"] == "test-model" and body["attempts"] == 1 and "output" not in body
    assert body["finishReason"] == "error"
    assert "code" not in body  # the run, not an error envelope
    assert len(upstream.chat_requests) == 1
    [stored] = stored_runs(funded)
    assert (stored.id, stored.status, stored.error) == (body["id"], RunStatus.ERROR, body["error"])
    assert debits(funded) == []


def test_billing_route_shows_balance_and_recent_ledger_rows(funded, upstream):
    make_agent(funded, "billed")
    run_id = run(funded, "billed").json()["id"]

    response = funded.client.get("/v1/agents/billing")

    assert response.status_code == 200
    body = response.json()
    assert body["balanceCents"] == 900 and body["feeCents"] == 100
    assert [(r["kind"], r["amountCents"], r.get("runId")) for r in body["ledger"]] == [("agent", -100, run_id), ("credit", 1000, None)]
    assert body["ledger"][0]["model"] == "test-model"


def test_billing_route_is_org_scoped(funded, org_b, upstream):
    make_agent(funded, "mine")
    run(funded, "mine")
    response = org_b.client.get("/v1/agents/billing")
    assert response.status_code == 200
    assert response.json() == {"balanceCents": 0, "feeCents": 100, "ledger": []}


def test_running_run_rows_are_not_listed_as_history(funded, upstream):
    agent = make_agent(funded, "busy")
    with funded.context():
        from django.utils import timezone

        Run.objects.create(id="run_inflight", agent_id=agent["id"], agent_name="busy", status=RunStatus.RUNNING, created_at=timezone.now())
    assert funded.client.get("/v1/agents/busy/runs").json() == {"runs": []}


def test_a_run_in_flight_holds_its_fee_at_the_gate(make_org, upstream):
    org = make_org("held")
    fund(org, 150)
    agent = make_agent(org, "parallel")
    with org.context():
        from django.utils import timezone

        now = timezone.now()
        Run.objects.create(id="run_inflight", agent_id=agent["id"], agent_name="parallel", status=RunStatus.RUNNING, fee_cents=100, created_at=now, started_at=now)

    response = run(org, "parallel")

    assert response.status_code == 402
    assert response.json()["heldCents"] == 100 and response.json()["balanceCents"] == 150
    assert upstream.chat_requests == []


def test_a_lone_surrogate_in_the_models_answer_is_replaced_and_the_run_recorded_and_billed(funded, upstream):
    """A gateway may escape half an emoji (`"\\ud800"`): the run is still ok, stored, debited once."""
    from sessions.models import Event

    make_agent(funded, "helper", tools=["calculator"])
    upstream.script(Reply(content="thinking \ud800", tool_calls=[("calculator", {"expression": "1+1"})]), Reply(content="bad \ud800 output"))
    response = run(funded, "helper", "hi")
    assert response.status_code == 200, response.content
    assert response.json()["output"] == "bad ? output"
    (stored,) = stored_runs(funded)
    assert (stored.status, stored.output) == ("ok", "bad ? output")
    assert len(debits(funded)) == 1
    with funded.context():
        texts = [e.payload for e in Event.objects.filter(session_id=stored.session_id, kind="message")]
    assert any("bad ? output" in t for t in texts) and any("thinking ?" in t for t in texts)


# -- usage: a run without `stream` asks the gateway not streamed (issue 53 item 3, decision 1534) -----


def test_a_run_without_stream_asks_the_gateway_not_streamed_and_records_its_usage_summed_over_its_rounds(funded, upstream):
    make_agent(funded, "counter", tools=["calculator"])
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "6*7"})], prompt_tokens=20, completion_tokens=5),
                    Reply(content="42", prompt_tokens=30, completion_tokens=2))

    response = run(funded, "counter", "6*7?")

    body = response.json()
    assert response.status_code == 200 and (body["output"], body["promptTokens"], body["completionTokens"]) == ("42", 50, 7)
    assert [("stream" in sent, "stream_options" in sent) for sent in upstream.chat_requests] == [(False, False)] * 2
    assert upstream.streams == []
    [stored] = stored_runs(funded)
    assert (stored.prompt_tokens, stored.completion_tokens) == (50, 7)


def test_a_run_without_stream_whose_gateway_gives_no_usage_records_none(funded, upstream):
    make_agent(funded, "quiet")
    upstream.script(Reply(content="no usage", usage=False))

    body = run(funded, "quiet").json()

    assert (body["status"], body["promptTokens"], body["completionTokens"]) == ("ok", None, None)  # never zeros, never a guess
    [stored] = stored_runs(funded)
    assert (stored.prompt_tokens, stored.completion_tokens) == (None, None)
