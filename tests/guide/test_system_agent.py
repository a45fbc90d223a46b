"""The system agent (spec 001 guided creation) on POST /v1/agents/chat, preset `system`.

Slash commands and artifact responses are answered without a model (no inference configured,
nothing billed, still a recorded chat run); free text goes to the real loopback model whose
`open_form` calls come back as the same artifacts.
"""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from agents_site.vocabulary import ArtifactSubtype
from billing.models import LedgerEntry
from chat.models import Message
from identity.models import IdentityProfile
from tests.chat.conftest import chat, fund, stored, user
from tests.chat.test_stream import frames
from tests.identity.conftest import create_agent, post
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

SPEC_SCHEMA_FIELDS = ["display_name", "custom_id", "bio", "avatar_url", "category", "connection_mode", "webhook_url", "health_check_url"]


def system(org, text: str, **extra):
    return chat(org, {"preset": "system", "messages": user(text), **extra})


def response_message(subtype: str, payload: dict) -> str:
    return json.dumps({"msg_subtype": "artifact_response", "artifact": {"subtype": subtype, "payload": payload}})


@pytest.fixture
def no_inference(settings):
    settings.INFERENCE_BASE_URL = ""


def second_user(org, username: str):
    """Return a Django client of another member of `org` (API key)."""
    from django.test import Client

    from tenancy.services import api_key_create, membership_set

    member = membership_set(org=org.org, username=f"{username}-{org.slug}", password="pw", is_admin=False)
    _, key = api_key_create(org=org.org, user=member.user)
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def only_artifact(body) -> dict:
    [op] = body["ops"]
    assert op["name"] == "artifact" and op["args"]["msg_subtype"] == "artifact_form"
    return op["args"]["artifact"]


def test_create_agent_answers_the_creation_form_without_a_model_as_a_recorded_free_chat_run(org_a, upstream, no_inference):
    response = system(org_a, "/create-agent Weather Bot")

    assert response.status_code == 200, response.content
    body = response.json()
    artifact = only_artifact(body)
    assert artifact["subtype"] == "agent_creation_form" and artifact["title_i18n_key"] == "agent.creation.title"
    assert artifact["client_action"] == {
        "endpoint": "POST /v1/identity/agents",
        "auth": "user_jwt",
        "allowed_endpoints": ["POST /v1/identity/agents", "POST /v1/identity/agents/:id/keys/register"],
        "after_success": {"endpoint": "POST /v1/identity/agents/:id/keys/register", "auth": "agent_token",
                          "params_from_response": {":id": "$.agent_id"}},
    }
    assert list(artifact["schema"]) == SPEC_SCHEMA_FIELDS
    assert artifact["schema"]["custom_id"] == {"type": "string", "pattern": "^[a-z0-9_]{4,30}$", "required": False,
                                               "reserved_prefixes": ["hashee", "system", "admin", "official"]}
    assert artifact["schema"]["display_name"] == {"type": "string", "min": 2, "max": 32, "required": True}
    assert artifact["schema"]["webhook_url"]["required_if"] == {"connection_mode": "webhook"}
    assert artifact["post_success_artifact"] == {"subtype": "agent_created", "msg_subtype": "artifact_response",
                                                 "allowed_fields": ["agent_id", "display_name"],
                                                 "forbidden_fields": ["agent_token", "private_key", "webhook_secret"]}
    assert artifact["values"] == {"display_name": "Weather Bot"}
    assert upstream.chat_requests == []
    rows = stored(org_a)
    [run] = rows["runs"]
    assert (run.id, run.kind, run.status, run.agent_name, run.model, run.fee_cents) == (body["runId"], "chat", "ok", "system", "fixed-reply", 0)
    assert run.session_id
    assert [(m.role, m.content) for m in rows["messages"]] == [("user", "/create-agent Weather Bot"), ("assistant", body["reply"])]
    assert rows["messages"][1].tool_calls == {"actions": [], "ops": body["ops"]}
    assert not LedgerEntry.objects.filter(run_id=run.id).exists()


def test_list_agents_shows_only_the_callers_agents_with_their_keys_state(org_a, no_inference):
    create_agent(org_a.client, display_name="Mine", custom_id="mine_bot")
    create_agent(second_user(org_a, "other"), display_name="Theirs", custom_id="their_bot")

    artifact = only_artifact(system(org_a, "/list-agents").json())

    assert artifact["subtype"] == "agent_list_display"
    assert [(a["custom_id"], a["display_name"], a["keys_registered"]) for a in artifact["agents"]] == [("mine_bot", "Mine", False)]


def test_delete_agent_carries_the_cascade_preview(org_a, no_inference):
    created = create_agent(org_a.client, display_name="Doomed", custom_id="doomed_bot").json()
    friend = second_user(org_a, "friend")
    assert post(friend, f"/v1/identity/agents/{created['agent_id']}/relations").status_code == 201

    body = system(org_a, "/delete-agent doomed_bot").json()

    artifact = only_artifact(body)
    assert artifact["subtype"] == "agent_deletion_confirm"
    assert artifact["cascade_preview"] == {"affected_h2a_count": 1, "affected_users_count": 1}
    assert artifact["agent"]["agent_id"] == created["agent_id"]
    assert artifact["client_action"] == {"endpoint": "DELETE /v1/identity/agents/:id", "auth": "user_jwt",
                                         "allowed_endpoints": ["DELETE /v1/identity/agents/:id"], "params": {":id": created["agent_id"]}}
    assert artifact["post_success_artifact"]["subtype"] == "agent_deleted"
    assert "1 relation with 1 user" in body["reply"]
    with org_a.context():
        assert IdentityProfile.objects.filter(agent_id=created["agent_id"]).exists()  # the system agent never deletes


def test_update_and_rotate_forms_name_the_agent_and_the_user_credential(org_a, no_inference):
    created = create_agent(org_a.client, display_name="Edit Me", custom_id="edit_me").json()

    update = only_artifact(system(org_a, "/update-agent edit_me").json())
    rotate = only_artifact(system(org_a, f"/rotate-token {created['agent_id']}").json())

    assert update["subtype"] == "agent_update_form" and update["values"]["display_name"] == "Edit Me"
    assert "custom_id" not in update["schema"]
    assert update["client_action"]["endpoint"] == "PATCH /v1/identity/agents/:id" and update["client_action"]["params"] == {":id": created["agent_id"]}
    assert rotate["subtype"] == "agent_token_rotate_confirm" and rotate["schema"] == {"emergency": {"type": "boolean", "default": False}}
    assert rotate["client_action"]["endpoint"] == "POST /v1/identity/agents/:id/token/regenerate"
    assert rotate["post_success_artifact"]["allowed_fields"] == ["agent_id", "display_name", "emergency"]


def test_an_action_on_an_unknown_or_foreign_agent_answers_the_list_instead(org_a, no_inference):
    create_agent(second_user(org_a, "other"), display_name="Theirs", custom_id="their_bot")

    for text in ("/delete-agent their_bot", "/update-agent"):
        body = system(org_a, text).json()
        assert only_artifact(body)["subtype"] == "agent_list_display"
        assert ("No identity agent 'their_bot' among yours." if "their" in text else "Which identity agent?") in body["reply"]


def test_an_agent_is_named_by_its_display_name_custom_id_or_id(org_a, no_inference):
    """Issue 57: after `/create-agent Echo`, `/rotate-token Echo` answered "No identity agent 'Echo' among yours"."""
    created = create_agent(org_a.client, display_name="Echo", custom_id="echo_bot").json()
    spaced = create_agent(org_a.client, display_name="Invoice Bot").json()
    create_agent(second_user(org_a, "other"), display_name="Echo", custom_id="their_echo")  # another user's: never found

    for ref in ("Echo", "echo", " ECHO ", "echo_bot", created["agent_id"]):
        body = system(org_a, f"/rotate-token {ref}").json()
        artifact = only_artifact(body)
        assert artifact["subtype"] == "agent_token_rotate_confirm", (ref, body["reply"])
        assert artifact["client_action"]["params"] == {":id": created["agent_id"]}
        assert body["reply"].startswith("Rotate the token of Echo (echo_bot):")  # one id form: the custom id
    body = system(org_a, "/update-agent Invoice Bot").json()  # a name with a space
    assert only_artifact(body)["client_action"]["params"] == {":id": spaced["agent_id"]}
    assert body["reply"] == f"Change Invoice Bot ({spaced['custom_id']}) below."


def test_a_name_several_agents_share_answers_those_to_choose_from(org_a, no_inference):
    first = create_agent(org_a.client, display_name="Echo", custom_id="echo_one").json()
    second = create_agent(org_a.client, display_name="echo", custom_id="echo_two").json()
    create_agent(org_a.client, display_name="Other", custom_id="other_bot")

    body = system(org_a, "/delete-agent Echo").json()
    listed = only_artifact(body)
    assert listed["subtype"] == "agent_list_display"
    assert sorted(a["agent_id"] for a in listed["agents"]) == sorted([first["agent_id"], second["agent_id"]])  # only the two
    assert body["reply"] == "2 of your identity agents are named 'Echo': choose one below, or say /delete-agent <custom id>."
    with org_a.context():
        assert IdentityProfile.objects.count() == 3  # nothing deleted: a choice is asked


def test_unknown_command_answers_the_help(org_a, no_inference):
    body = system(org_a, "/frobnicate").json()
    assert body["ops"] == [] and body["reply"].startswith("Unknown command /frobnicate.") and "/create-agent" in body["reply"]


def test_the_artifact_response_on_the_same_conversation_is_acknowledged_from_what_is_stored(org_a, no_inference):
    opened = system(org_a, "/create-agent").json()
    created = create_agent(org_a.client, display_name="Weather", custom_id="weather_bot").json()

    response = system(org_a, response_message("agent_created", {"agent_id": created["agent_id"], "display_name": "Weather"}),
                      conversationId=opened["conversationId"])

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["conversationId"] == opened["conversationId"] and body["ops"] == []
    assert body["reply"].startswith("✓ created Weather (weather_bot).")  # the custom id, as the identity pages show it
    messages = stored(org_a)["messages"]
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert json.loads(messages[2].content)["artifact"]["payload"] == {"agent_id": created["agent_id"], "display_name": "Weather"}
    assert not any(created["agent_token"] in m.content or created["agent_token"] in json.dumps(m.tool_calls) for m in messages)


@pytest.mark.parametrize("payload, said", [
    ({"agent_id": "ext_1", "agent_token": "x"}, "must not carry agent_token"),
    ({"agent_id": "ext_1", "private_key": "x"}, "must not carry private_key"),
    ({"agent_id": "ext_1", "webhook_secret": "x"}, "must not carry webhook_secret"),
    ({"agent_id": "ext_1", "bio": "x"}, "field not allowed: bio"),
    ({"display_name": "x"}, "needs agent_id"),
    ({"agent_id": 7}, "must be a short string"),
])
def test_an_artifact_response_with_a_field_outside_the_allowed_ones_is_refused_and_nothing_stored(org_a, no_inference, payload, said):
    response = system(org_a, response_message("agent_created", payload))

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request" and said in response.json()["error"]
    assert '"x"' not in response.json()["error"]
    assert stored(org_a) == {"conversations": [], "messages": [], "runs": []}


def test_a_token_smuggled_in_an_allowed_field_is_refused_as_a_secret(org_a, no_inference):
    token = create_agent(org_a.client).json()["agent_token"]

    response = system(org_a, response_message("agent_created", {"agent_id": "ext_1", "display_name": token[:128]}))

    assert response.status_code == 422 and response.json()["code"] == "secret_in_transcript"
    assert stored(org_a)["messages"] == []


def test_an_artifact_form_subtype_is_not_a_response(org_a, no_inference):
    response = system(org_a, response_message("agent_creation_form", {"agent_id": "x"}))
    assert response.status_code == 400 and "subtype must be one of" in response.json()["error"]


def test_deleted_and_rotated_responses_are_checked_against_the_store(org_a, no_inference):
    created = create_agent(org_a.client, display_name="Gone", custom_id="gone_bot").json()
    still = system(org_a, response_message("agent_deleted", {"agent_id": created["agent_id"], "display_name": "Gone"})).json()
    rotated = system(org_a, response_message("agent_token_rotated", {"agent_id": created["agent_id"], "emergency": True})).json()
    assert org_a.client.delete(f"/v1/identity/agents/{created['agent_id']}").status_code == 204
    gone = system(org_a, response_message("agent_deleted", {"agent_id": created["agent_id"], "display_name": "Gone"})).json()

    assert "still exists" in still["reply"]
    assert rotated["reply"].startswith(f"✓ rotated the token of Gone ({created['custom_id']}); revoked the old token")
    assert gone["reply"].startswith("✓ deleted Gone.")


def test_free_text_goes_to_the_model_whose_open_form_becomes_the_same_artifact(org_a, upstream):
    fund(org_a)
    created = create_agent(org_a.client, display_name="Doomed", custom_id="doomed_bot").json()
    upstream.script(Reply(content=None, tool_calls=[("open_form", {"form": "agent_deletion_confirm", "agent": "doomed_bot"})]))

    body = system(org_a, "please remove my doomed bot").json()

    artifact = only_artifact(body)
    assert artifact["subtype"] == "agent_deletion_confirm" and artifact["agent"]["agent_id"] == created["agent_id"]
    assert artifact["cascade_preview"] == {"affected_h2a_count": 0, "affected_users_count": 0}
    sent = upstream.chat_requests[0]
    assert [t["function"]["name"] for t in sent["tools"]] == ["open_form"]
    with org_a.context():
        assert Message.objects.get(role="assistant").tool_calls["ops"] == body["ops"]
        assert Run.objects.get().model != "fixed-reply"


@pytest.mark.django_db(transaction=True)
def test_a_streamed_command_sends_start_delta_ops_and_chat_frames(org_a, no_inference):
    response = system(org_a, "/create-agent", stream=True)

    got = frames(response)
    assert [event for event, _ in got] == ["start", "delta", "ops", "chat"]
    assert got[2][1]["ops"][0]["args"]["artifact"]["subtype"] == ArtifactSubtype.AGENT_CREATION_FORM
    assert got[3][1]["run"]["status"] == "ok" and got[3][1]["ops"] == got[2][1]["ops"]


def test_list_agents_tells_identity_agents_from_platform_agents(org_a, no_inference):
    # The console's Platform agents page lists this agent; /list-agents must not answer "You have no agents".
    created = org_a.client.post("/v1/agents", json.dumps({"name": "helper"}), content_type="application/json")
    assert created.status_code == 201
    reply = system(org_a, "/list-agents").json()["reply"]
    assert reply == ("You have no identity agents yet. /create-agent makes one. This org also has 1 platform agent "
                     "(run by this platform); it is on the Platform agents page, not here.")

    create_agent(org_a.client, display_name="Mine", custom_id="mine_bot")  # an identity agent is an agent row too (hosting external)
    reply = system(org_a, "/list-agents").json()["reply"]
    assert reply.startswith("You have 1 identity agent. This org also has 1 platform agent ")


def test_help_says_which_agents_the_system_agent_manages(org_a, no_inference):
    reply = system(org_a, "/help").json()["reply"]
    assert "identity agents" in reply and "Platform agents" in reply and "agent(s)" not in reply
