"""POST /v1/agents/chat against the real loopback upstream: reply, actions, ops, threads, runs, fees."""

from __future__ import annotations

import pytest

from agents.models import Agent
from billing.models import Account
from chat.models import Conversation, Message
from tests.chat.conftest import charged, chat, fund, make_agent, stored, user
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

ASSISTANT_PROMPT_START = "You are a helpful assistant."


def test_round_answers_the_reply_and_stores_only_the_last_user_message_and_the_reply(funded, upstream, settings):
    settings.AGENTS_CHAT_FEE_CENTS = 7
    upstream.script(Reply(content="Paris."))
    messages = [{"role": "user", "content": "Plan\na trip "}, {"role": "assistant", "content": "Where to?"},
                {"role": "user", "content": "Capital of France?"}]

    response = chat(funded, {"messages": messages})

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"reply", "actions", "ops", "conversationId", "runId"}
    assert (body["reply"], body["actions"], body["ops"]) == ("Paris.", [], [])
    assert body["conversationId"].startswith("conv_") and body["runId"].startswith("run_")
    rows = stored(funded)
    [conversation] = rows["conversations"]
    assert (conversation.id, conversation.title, conversation.busy_run_id) == (body["conversationId"], "Plan a trip", "")
    assert [(m.role, m.content, m.run_id) for m in rows["messages"]] == [
        ("user", "Capital of France?", body["runId"]), ("assistant", "Paris.", body["runId"])]
    [run] = rows["runs"]
    assert (run.id, run.kind, run.agent_id, run.agent_name, run.status, run.fee_cents) == (body["runId"], "chat", None, "assistant", "ok", 7)
    assert run.input == "Capital of France?" and run.session_id
    [debit] = charged(funded)
    assert (debit.run_id, debit.amount_cents) == (body["runId"], -7)
    assert Account.objects.get(org=funded.org).balance_cents == 993
    sent = upstream.chat_requests[0]
    assert sent["messages"][0]["role"] == "system" and sent["messages"][0]["content"].startswith(ASSISTANT_PROMPT_START)
    assert sent["messages"][1:] == messages
    assert [t["function"]["name"] for t in sent["tools"]] == ["current_time", "calculator"]


def test_system_text_follows_the_preset_prompt_after_a_blank_line(funded, upstream):
    response = chat(funded, {"messages": user("hi"), "system": "Answer in French."})
    assert response.status_code == 200
    system = upstream.chat_requests[0]["messages"][0]["content"]
    assert system.startswith(ASSISTANT_PROMPT_START) and system.endswith(".\n\nAnswer in French.")


def test_a_server_tool_call_runs_now_and_comes_back_as_an_action(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("calculator", {"expression": "2+3"})]), Reply(content="It is 5."))

    body = chat(funded, {"messages": user("2+3?")}).json()

    assert body["reply"] == "It is 5." and body["ops"] == []
    assert body["actions"] == [{"name": "calculator", "args": {"expression": "2+3"}, "result": "5"}]
    assistant = stored(funded)["messages"][-1]
    assert assistant.tool_calls == {"actions": body["actions"], "ops": []}
    detail = funded.client.get(f"/v1/agents/chat/conversations/{body['conversationId']}").json()
    assert detail["messages"][-1]["toolCalls"] == {"actions": body["actions"], "ops": []}


def test_a_failing_server_tool_is_still_an_action_with_its_error(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("calculator", {"expression": "1/0"})]), Reply(content="Cannot."))
    [action] = chat(funded, {"messages": user("1/0?")}).json()["actions"]
    assert action["name"] == "calculator" and "error" in action and "result" not in action


def test_a_call_of_the_callers_tool_ends_the_round_as_an_op(funded, upstream):
    tool = {"type": "function", "function": {"name": "pick_color", "parameters": {"type": "object", "properties": {"c": {"type": "string"}}}}}
    upstream.script(Reply(content="Picking.", tool_calls=[("pick_color", {"c": "red"})]))

    body = chat(funded, {"messages": user("paint it"), "tools": [tool]}).json()

    assert body["ops"] == [{"name": "pick_color", "args": {"c": "red"}}] and body["actions"] == []
    assert body["reply"] == "Picking."
    assert len(upstream.chat_requests) == 1
    offered = [t["function"]["name"] for t in upstream.chat_requests[0]["tools"]]
    assert offered == ["current_time", "calculator", "pick_color"]
    assert stored(funded)["messages"][-1].tool_calls == {"actions": [], "ops": body["ops"]}


def test_the_system_preset_hands_open_form_back_to_the_client(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("open_form", {"form": "create_agent", "values": {"name": "scout"}})]))

    body = chat(funded, {"messages": user("make me an agent"), "preset": "system"}).json()

    assert body["ops"] == [{"name": "open_form", "args": {"form": "create_agent", "values": {"name": "scout"}}}]
    assert body["actions"] == []
    sent = upstream.chat_requests[0]
    assert [t["function"]["name"] for t in sent["tools"]] == ["open_form"]
    assert "system agent" in sent["messages"][0]["content"]
    [run] = stored(funded)["runs"]
    assert (run.agent_name, run.agent_id) == ("system", None)


def test_an_agent_drives_the_round_with_its_model_instructions_and_tools(funded, upstream):
    agent = make_agent(funded, "terse", instructions="Be terse.", tools=["calculator"], model="best")
    upstream.script(Reply(content=None, tool_calls=[("calculator", {"expression": "6*7"})]), Reply(content="42"))

    body = chat(funded, {"messages": user("6*7"), "agent": "terse", "system": "No prose."}).json()

    assert body["reply"] == "42" and body["actions"][0]["result"] == "42"
    sent = upstream.chat_requests[0]
    assert sent["model"] == "best"
    assert sent["messages"] == [{"role": "system", "content": "Be terse.\n\nNo prose."}, {"role": "user", "content": "6*7"}]
    assert [t["function"]["name"] for t in sent["tools"]] == ["calculator"]
    [run] = stored(funded)["runs"]
    assert (run.agent_id, run.agent_name, run.kind) == (agent["id"], "terse", "chat")
    by_id = chat(funded, {"messages": user("again"), "agent": agent["id"]})
    assert by_id.status_code == 200


def test_an_unknown_or_foreign_agent_is_404_and_nothing_is_stored(funded, org_b, upstream):
    make_agent(org_b, "theirs")
    for ref in ("nobody", "theirs"):
        response = chat(funded, {"messages": user("hi"), "agent": ref})
        assert response.status_code == 404
        assert response.json() == {"status": 404, "code": "not_found", "error": "agent not found"}
    assert stored(funded) == {"conversations": [], "messages": [], "runs": []}
    assert upstream.chat_requests == [] and charged(funded) == []


def test_an_external_agent_is_refused_with_409_and_nothing_is_stored(funded, upstream):
    from agents.services import agent_create_external

    with funded.context():
        agent_create_external(name="elsewhere")
    response = chat(funded, {"messages": user("hi"), "agent": "elsewhere"})
    assert response.status_code == 409 and response.json()["code"] == "agent_external"
    assert stored(funded) == {"conversations": [], "messages": [], "runs": []} and upstream.chat_requests == []


def test_a_continued_conversation_sends_the_stored_thread_before_the_new_messages(funded, upstream):
    upstream.script(Reply(content="Hello Ann."), Reply(content="You are Ann."))
    first = chat(funded, {"messages": user("I am Ann")}).json()

    second = chat(funded, {"messages": user("Who am I?"), "conversationId": first["conversationId"]}).json()

    assert second["conversationId"] == first["conversationId"] and second["reply"] == "You are Ann."
    assert upstream.chat_requests[1]["messages"][1:] == [
        {"role": "user", "content": "I am Ann"}, {"role": "assistant", "content": "Hello Ann."},
        {"role": "user", "content": "Who am I?"}]
    rows = stored(funded)
    assert len(rows["conversations"]) == 1
    assert [m.content for m in rows["messages"]] == ["I am Ann", "Hello Ann.", "Who am I?", "You are Ann."]
    assert [m.position for m in rows["messages"]] == [1, 2, 3, 4]


def test_the_thread_sent_is_bounded_by_history_chars_dropping_the_oldest_turns(funded, upstream, settings):
    upstream.script(Reply(content="1234567890"), Reply(content="abcde"), Reply(content="ok"))
    conversation = chat(funded, {"messages": user("0123456789")}).json()["conversationId"]
    chat(funded, {"messages": user("xyz"), "conversationId": conversation})
    settings.AGENTS_CHAT_HISTORY_CHARS = 18  # the stored turns are 10, 10, 3 and 5 characters long

    chat(funded, {"messages": user("next"), "conversationId": conversation})

    assert upstream.chat_requests[2]["messages"][1:] == [
        {"role": "assistant", "content": "1234567890"}, {"role": "user", "content": "xyz"},
        {"role": "assistant", "content": "abcde"}, {"role": "user", "content": "next"}]


def test_an_unknown_conversation_id_starts_a_new_conversation(funded, upstream):
    body = chat(funded, {"messages": user("hi"), "conversationId": "conv_" + "0" * 32}).json()
    assert body["conversationId"] != "conv_" + "0" * 32
    assert [c.id for c in stored(funded)["conversations"]] == [body["conversationId"]]


def test_another_orgs_conversation_is_never_continued_or_read(funded, org_b, upstream):
    fund(org_b)
    upstream.script(Reply(content="secret plan"))
    theirs = chat(funded, {"messages": user("our plan is X")}).json()["conversationId"]

    response = chat(org_b, {"messages": user("what was the plan?"), "conversationId": theirs})

    assert response.status_code == 200
    assert response.json()["conversationId"] != theirs
    assert upstream.chat_requests[1]["messages"][1:] == [{"role": "user", "content": "what was the plan?"}]
    assert [m.content for m in stored(funded)["messages"]] == ["our plan is X", "secret plan"]
    assert org_b.client.get(f"/v1/agents/chat/conversations/{theirs}").status_code == 404
    assert org_b.client.delete(f"/v1/agents/chat/conversations/{theirs}").status_code == 404
    assert len(stored(funded)["messages"]) == 2


def test_a_tool_turn_is_sent_as_a_labelled_user_turn(funded, upstream):
    chat(funded, {"messages": [{"role": "user", "content": "open it"}, {"role": "tool", "content": '{"submitted": true}'}],
                  "preset": "system"})
    assert upstream.chat_requests[0]["messages"][1:] == [
        {"role": "user", "content": "open it"}, {"role": "user", "content": 'Tool result:\n{"submitted": true}'}]


def test_a_failed_run_is_502_with_its_run_and_the_users_message_stays(funded, upstream):
    upstream.script(*[Reply(status=500)] * 3)

    response = chat(funded, {"messages": user("hello?")})

    assert response.status_code == 502
    body = response.json()
    assert (body["status"], body["code"]) == (502, "run_failed") and body["error"]
    rows = stored(funded)
    [run] = rows["runs"]
    assert (body["runId"], run.status, run.kind) == (run.id, "error", "chat")
    assert body["conversationId"] == rows["conversations"][0].id and rows["conversations"][0].busy_run_id == ""
    assert [(m.role, m.content) for m in rows["messages"]] == [("user", "hello?")]
    assert charged(funded) == []
    again = chat(funded, {"messages": user("now?"), "conversationId": body["conversationId"]})
    assert again.status_code == 200


def test_a_round_without_balance_is_402_and_stores_nothing(org_a, upstream):
    response = chat(org_a, {"messages": user("hi")})
    assert response.status_code == 402 and response.json()["code"] == "insufficient_balance"
    assert stored(org_a) == {"conversations": [], "messages": [], "runs": []} and upstream.chat_requests == []


def test_a_round_without_inference_is_503_and_stores_nothing(funded, upstream, settings):
    settings.INFERENCE_BASE_URL = ""
    response = chat(funded, {"messages": user("hi")})
    assert response.status_code == 503 and response.json()["code"] == "inference_unavailable"
    assert stored(funded) == {"conversations": [], "messages": [], "runs": []}


def test_a_title_is_cut_to_80_characters_and_defaults_when_no_user_speaks(funded, upstream):
    long = chat(funded, {"messages": user("  " + "w" * 100 + "  ")}).json()
    none = chat(funded, {"messages": [{"role": "assistant", "content": "Hi, how can I help?"}]}).json()
    with funded.context():
        assert Conversation.objects.get(pk=long["conversationId"]).title == "w" * 80
        assert Conversation.objects.get(pk=none["conversationId"]).title == "New conversation"
        assert list(Message.objects.filter(conversation_id=none["conversationId"]).values_list("role", flat=True)) == ["assistant"]


def test_the_chat_run_is_listed_with_its_kind_and_agents_count_every_kind(funded, upstream):
    agent = make_agent(funded, "counted")
    funded.client.post("/v1/agents/counted/run", {"input": "x"}, content_type="application/json")
    chat(funded, {"messages": user("hi"), "agent": "counted"})
    chat(funded, {"messages": user("hi")})

    runs = funded.client.get("/v1/agents/counted/runs").json()["runs"]
    assert sorted(r["kind"] for r in runs) == ["chat", "run"] and {r["agentId"] for r in runs} == {agent["id"]}
    assert funded.client.get("/v1/agents/counted").json()["runs"] == 2
    chats = funded.client.get("/v1/agents/runs?kind=chat").json()["runs"]
    assert [(r["kind"], r["agent"], "agentId" in r) for r in chats] == [("chat", "assistant", False), ("chat", "counted", True)]
    assert [r["kind"] for r in funded.client.get("/v1/agents/runs?kind=run").json()["runs"]] == ["run"]
    assert len(funded.client.get("/v1/agents/runs").json()["runs"]) == 3
    bad = funded.client.get("/v1/agents/runs?kind=nope")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"
    series = {s["key"]: sum(p["v"] for p in s["points"]) for s in funded.client.get("/v1/agents/metrics?range=24h").json()["series"]}
    assert series == {"assistant": 1, "counted": 2}
    activity = [row["agent"] for row in funded.client.get("/v1/agents/activity").json()["activity"] if row["kind"] == "invoked"]
    assert sorted(activity) == ["assistant", "counted", "counted"]


def test_runs_in_flight_filter_by_kind_too(funded, upstream):
    assert funded.client.get("/v1/agents/runs?status=running&kind=chat").json() == {"runs": []}
    assert funded.client.get("/v1/agents/runs?status=queued&kind=bogus").status_code == 400


def test_presets_are_public_and_sorted(client):
    response = client.get("/v1/agents/chat/presets")
    assert response.status_code == 200
    presets = response.json()["presets"]
    assert [p["id"] for p in presets] == sorted(p["id"] for p in presets)
    by_id = {p["id"]: p for p in presets}
    assert by_id["assistant"]["serverExecuted"] is True and by_id["assistant"]["tools"] == ["current_time", "calculator"]
    assert by_id["system"]["serverExecuted"] is False and by_id["system"]["tools"] == ["open_form"]
    assert set(by_id["system"]) == {"id", "title", "systemPrompt", "serverExecuted", "tools"}


def test_the_assistant_preset_lists_http_get_when_the_deployment_allows_it(client, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = ["example.com"]
    presets = {p["id"]: p for p in client.get("/v1/agents/chat/presets").json()["presets"]}
    assert presets["assistant"]["tools"] == ["current_time", "calculator", "http_get"]


def test_chat_without_a_principal_is_403(client, upstream):
    response = client.post("/v1/agents/chat", {"messages": user("hi")}, content_type="application/json")
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert upstream.chat_requests == []


def test_agents_are_untouched_by_a_preset_round(funded, upstream):
    chat(funded, {"messages": user("hi")})
    with funded.context():
        assert Agent.objects.count() == 0


# -- usage: a round without `stream` asks the gateway not streamed (issue 53 item 3, decision 1534) ---


def test_a_round_without_stream_asks_the_gateway_not_streamed_and_records_its_usage(funded, upstream):
    upstream.script(Reply(content="counted", prompt_tokens=12, completion_tokens=4))

    response = chat(funded, {"messages": user("count me")})

    body = response.json()
    assert response.status_code == 200 and body["reply"] == "counted"
    sent = upstream.chat_requests[0]
    assert "stream" not in sent and "stream_options" not in sent and upstream.streams == []
    run = funded.client.get(f"/v1/agents/runs/{body['runId']}").json()
    assert (run["kind"], run["promptTokens"], run["completionTokens"]) == ("chat", 12, 4)
