"""`response.completed` / `response.incomplete` / `response.failed` / `response.cancelled`: webhook events an
endpoint subscribes to apart from `run.finished`, which a response's run sends as every run does."""

from __future__ import annotations

import pytest

from tests.responses_api.conftest import BASE_PATH
from tests.support.upstream import Reply
from tests.webhooks.conftest import create_endpoint, inline_delivery, receiver, verified_types  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]


def test_each_ending_is_its_own_event_beside_run_finished(org, receiver, upstream):  # noqa: F811
    endpoint = create_endpoint(org, receiver.url, events=["response.completed", "response.incomplete", "response.failed",
                                                          "run.finished"])
    receiver.secret = endpoint["secret"]
    upstream.script(Reply(content="whole"), Reply(content="cut", finish="length"), Reply(status=400, error_body={
        "error": {"message": "no", "type": "invalid_request_error"}}))

    answers = [org.client.post(BASE_PATH + "/responses", {"model": "writer", "input": text}, content_type="application/json")
               for text in ("one", "two", "three")]

    assert [a.json()["status"] for a in answers] == ["completed", "incomplete", "failed"]
    types = verified_types(receiver)
    assert sorted(types) == sorted(["response.completed", "response.incomplete", "response.failed"] + ["run.finished"] * 3)
    responses = {got.verified["type"]: got.verified["data"] for got in receiver.received if got.verified["type"] != "run.finished"}
    assert responses["response.completed"]["id"] == answers[0].json()["id"]
    assert responses["response.completed"]["output"][0]["content"][0]["text"] == "whole"
    assert responses["response.incomplete"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert org.key not in str(responses)  # never a credential


def test_an_endpoint_of_run_finished_only_hears_no_response_event(org, receiver, upstream):  # noqa: F811
    endpoint = create_endpoint(org, receiver.url, events=["run.finished"])
    receiver.secret = endpoint["secret"]
    upstream.script(Reply(content="hi"))

    org.client.post(BASE_PATH + "/responses", {"model": "writer", "input": "hi"}, content_type="application/json")

    assert verified_types(receiver) == ["run.finished"]
