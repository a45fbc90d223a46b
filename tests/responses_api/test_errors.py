"""Bad input to the Responses API: OpenAI's error object naming the `param`, and nothing recorded —
no run, no response, no conversation turn, no debit. Another org's response is the same 404 as an
unknown one, on every route."""

from __future__ import annotations

import pytest
from django.test import Client

from billing.services import credit_add
from chat.models import Conversation
from responses_api.models import StoredResponse
from tests.responses_api.conftest import BASE_PATH, conforms, debits, make_agent, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True)]

URL = BASE_PATH + "/responses"


def create(org, body: dict):
    return org.client.post(URL, body, content_type="application/json")


def assert_nothing_recorded(org) -> None:
    assert stored_runs(org) == []
    with org.context():
        assert not StoredResponse.objects.exists() and not Conversation.objects.exists()
    assert debits(org) == []


@pytest.mark.parametrize(("body", "param"), [
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "hi", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tools[0].type"),
    ({"input": "hi", "reasoning": {"effort": "high"}}, "reasoning"),
    ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "look"},
                                             {"type": "input_image", "image_url": "https://example.com/a.png"}]}]},
     "input[0].content[1]"),
    ({"input": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}]},
     "input[0].content[0]"),
    ({"input": [{"type": "reasoning", "summary": []}]}, "input[0].type"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"input": "hi", "include": ["reasoning.encrypted_content"]}, "include"),
    ({"input": "hi", "prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"input": "hi", "tool_choice": {"type": "web_search_preview"}}, "tool_choice"),
    ({"input": "hi", "text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ({"input": "hi", "temperature": 3}, "temperature"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "hi", "metadata": {"k": 1}}, "metadata.k"),
    ({"input": "hi", "background": True, "store": False}, "background"),
    ({"input": "hi", "previous_response_id": "run_x", "conversation": "conv_x"}, "conversation"),
    ({"input": []}, "input"),
    ({}, "input"),
])
def test_bad_input_is_a_400_naming_the_param_and_records_nothing(org, body, param):
    response = create(org, {"model": "writer", **body})

    assert response.status_code == 400, response.content
    conforms(response.json(), "ErrorResponse")
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param)
    assert_nothing_recorded(org)


def test_an_unknown_previous_response_or_conversation_is_a_404_naming_it(org):
    unknown = create(org, {"model": "writer", "input": "hi", "previous_response_id": "run_" + "0" * 32})
    no_thread = create(org, {"model": "writer", "input": "hi", "conversation": "conv_" + "0" * 32})

    assert (unknown.status_code, unknown.json()["error"]["param"]) == (404, "previous_response_id")
    assert (no_thread.status_code, no_thread.json()["error"]["param"]) == (404, "conversation")
    assert_nothing_recorded(org)


def test_another_orgs_response_is_not_found_on_every_route(org, make_org, upstream):
    upstream.script(Reply(content="mine"))
    mine = create(org, {"model": "writer", "input": "hi"}).json()["id"]
    other = make_org("rsp-other")
    credit_add(org=other.org, cents=1000, actor="test")
    make_agent(other, "writer")

    answers = [other.client.get(f"{URL}/{mine}"), other.client.delete(f"{URL}/{mine}"),
               other.client.post(f"{URL}/{mine}/cancel", content_type="application/json"), other.client.get(f"{URL}/{mine}/input_items"),
               other.client.get(f"{URL}/{mine}", {"stream": "true", "starting_after": "0"}),
               create(other, {"model": "writer", "input": "steal", "previous_response_id": mine})]

    assert [a.status_code for a in answers] == [404] * 6
    assert stored_runs(other) == []
    assert org.client.get(f"{URL}/{mine}").status_code == 200  # untouched


def test_a_credential_in_the_input_is_refused_and_nothing_stored(org):
    response = create(org, {"model": "writer", "input": "my key is AKIAIOSFODNN7EXAMPLE ok"})

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "secret_in_transcript"
    assert "AKIAIOSFODNN7EXAMPLE" not in response.content.decode()
    assert_nothing_recorded(org)


def test_an_agent_with_approval_rules_is_refused(org):
    make_agent(org, "careful", tools=["calculator"], approval={"tools": ["calculator"]})

    response = create(org, {"model": "careful", "input": "hi"})

    assert (response.status_code, response.json()["error"]["code"], response.json()["error"]["param"]) == (
        400, "approval_unsupported", "model")
    assert_nothing_recorded(org)


def test_no_key_is_401_and_an_unknown_model_404(org):
    anonymous = Client().post(URL, {"model": "writer", "input": "hi"}, content_type="application/json")
    missing = create(org, {"model": "ghost", "input": "hi"})

    assert anonymous.status_code == 401 and anonymous.json()["error"]["type"] == "authentication_error"
    assert (missing.status_code, missing.json()["error"]["code"], missing.json()["error"]["param"]) == (
        404, "model_not_found", "model")


def test_input_items_paging_is_checked(org, upstream):
    upstream.script(Reply(content="ok"))
    rid = create(org, {"model": "writer", "input": "hi"}).json()["id"]

    assert org.client.get(f"{URL}/{rid}/input_items", {"limit": "0"}).json()["error"]["param"] == "limit"
    assert org.client.get(f"{URL}/{rid}/input_items", {"order": "up"}).json()["error"]["param"] == "order"
    assert org.client.get(f"{URL}/{rid}/input_items", {"after": "msg_nope"}).json()["error"]["param"] == "after"


def test_a_key_limited_to_some_agents_reaches_only_their_responses(org, upstream):
    from django.test import Client as HttpClient

    from tenancy.services import api_key_create

    make_agent(org, "private")
    upstream.script(Reply(content="secret plans"))
    private = create(org, {"model": "private", "input": "plan"}).json()["id"]
    _, key = api_key_create(org=org.org, user=org.user, name="tool", scope="openai", allowed_agents=["writer"])
    limited = HttpClient(HTTP_AUTHORIZATION=f"Bearer {key}")

    answers = [limited.get(f"{URL}/{private}"), limited.get(f"{URL}/{private}/input_items"),
               limited.delete(f"{URL}/{private}"),
               limited.post(URL, {"model": "writer", "input": "continue", "previous_response_id": private},
                            content_type="application/json")]

    assert [a.status_code for a in answers] == [404] * 4
    assert answers[-1].json()["error"]["param"] == "previous_response_id"
    assert org.client.get(f"{URL}/{private}").status_code == 200
