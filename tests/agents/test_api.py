"""Agent definitions over HTTP (spec 003: /v1/agents; reference §2.1 rules and messages)."""

import json

import pytest

from agents.models import Agent
from runs.models import Run
from agents_site.vocabulary import RunStatus

pytestmark = pytest.mark.both_stores

NAME_RULE = "name must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


def post(client, body, path="/v1/agents"):
    return client.post(path, body if isinstance(body, str) else json.dumps(body), content_type="application/json")


def patch(client, ref, body):
    return client.patch(f"/v1/agents/{ref}", json.dumps(body), content_type="application/json")


def agent_names(org):
    with org.context():
        return sorted(Agent.objects.values_list("name", flat=True))


def assert_error(response, status, message=None, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["status"] == status and isinstance(body["code"], str) and isinstance(body["error"], str)
    if message is not None:
        assert body["error"] == message
    if code is not None:
        assert body["code"] == code
    return body


def test_create_answers_201_with_the_agent_view(org_a, settings):
    settings.AGENTS_DEFAULT_MODEL = "house-model"
    response = post(org_a.client, {"name": "writer", "instructions": "Be brief.", "description": " d ", "tools": [" calculator ", "calculator", "", "current_time"]})
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("agent_") and len(body["id"]) == len("agent_") + 32
    assert body["name"] == "writer" and body["model"] == "house-model" and body["runs"] == 0
    assert body["tools"] == ["calculator", "current_time"] and body["description"] == "d"
    assert body["status"] == "ready" and body["executionMode"] == "one-shot" and "schedule" not in body
    assert body["createdAt"].endswith("Z")
    with org_a.context():
        stored = Agent.objects.get(name="writer")
        assert stored.instructions == "Be brief." and stored.tools == ["calculator", "current_time"]


def test_list_gives_each_agent_its_run_count(org_a, django_assert_max_num_queries):
    post(org_a.client, {"name": "one"})
    post(org_a.client, {"name": "two"})
    with org_a.context():
        agent = Agent.objects.get(name="one")
        for i in range(3):
            Run.objects.create(id=f"run_{i}", agent=agent, agent_name="one", status=RunStatus.OK, created_at=agent.created_at, finished_at=agent.created_at)
        Run.objects.create(id="run_q", agent=agent, agent_name="one", status=RunStatus.QUEUED, created_at=agent.created_at)
    with django_assert_max_num_queries(8):
        response = org_a.client.get("/v1/agents")
    assert response.status_code == 200
    runs = {a["name"]: a["runs"] for a in response.json()["agents"]}
    assert runs == {"one": 3, "two": 0}


def test_empty_org_lists_no_agents(org_a):
    response = org_a.client.get("/v1/agents")
    assert response.status_code == 200 and response.json() == {"agents": []}


def test_get_by_id_and_by_name_is_the_same_agent(org_a):
    created = post(org_a.client, {"name": "same", "instructions": "x"}).json()
    by_id = org_a.client.get(f"/v1/agents/{created['id']}").json()
    by_name = org_a.client.get("/v1/agents/same").json()
    assert by_id == by_name
    assert by_id["instructions"] == "x" and by_id["recentRuns"] == []


def test_id_match_wins_over_name_match(org_a):
    first = post(org_a.client, {"name": "first"}).json()
    # A second agent named like the first's id: the id still resolves to the first.
    second = post(org_a.client, {"name": first["id"][:64]})
    assert second.status_code == 201
    assert org_a.client.get(f"/v1/agents/{first['id']}").json()["name"] == "first"


def test_another_orgs_agent_is_404_by_id_and_by_name(org_a, org_b):
    created = post(org_a.client, {"name": "private"}).json()
    for ref in (created["id"], "private"):
        assert_error(org_b.client.get(f"/v1/agents/{ref}"), 404, "agent not found", "not_found")
        assert_error(patch(org_b.client, ref, {"description": "mine now"}), 404)
        assert_error(org_b.client.delete(f"/v1/agents/{ref}"), 404)
    assert agent_names(org_a) == ["private"]
    assert "description" not in org_a.client.get("/v1/agents/private").json()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "name is required"),
        ({"name": "   "}, "name is required"),
        ({"name": "-bad"}, NAME_RULE),
        ({"name": "has space"}, NAME_RULE),
        ({"name": "x" * 65}, NAME_RULE),
        ({"name": "ok", "instructions": "x" * (32 * 1024 + 1)}, "instructions too large"),
        ({"name": "ok", "executionMode": "long-running"}, "a long-running agent requires a 'schedule' (5-field cron)"),
        ({"name": "ok", "executionMode": "daemon"}, "executionMode must be 'one-shot' or 'long-running'"),
        ({"name": "ok", "computeRef": "x" * 257}, "computeRef too long"),
        ({"name": "ok", "serviceAccountId": "x" * 257}, "serviceAccountId too long"),
        ({"name": "ok", "tools": [f"t{i}" for i in range(65)]}, "an agent has at most 64 tools"),
        ({"name": "ok", "tools": ["x" * 129]}, "tool names are at most 128 characters"),
        ({"name": "ok", "timezone": "Mars/Base"}, "invalid 'timezone': 'Mars/Base' is not an IANA time zone"),
    ],
)
def test_invalid_create_is_400_and_writes_nothing(org_a, body, message):
    assert_error(post(org_a.client, body), 400, message, "invalid_request")
    assert agent_names(org_a) == []


@pytest.mark.parametrize(
    "schedule",
    [
        "0 0 * * * *", "@daily", "@hourly", "61 * * * *", "* * *", "not a cron",
        # Reference §6.1 grammar: no names, no 7 for Sunday, no L/?/#/W, no `n/step`.
        "0 0 * * MON", "0 0 * JAN *", "0 0 * * 7", "0 0 * * 0-7", "0 0 L * *", "0 0 ? * *", "0 0 * * 1#2",
        "0 0 15W * *", "5/10 * * * *", ",".join(["1"] * 120) + " * * * *",
    ],
)
def test_bad_cron_is_400_and_writes_nothing(org_a, schedule):
    body = assert_error(post(org_a.client, {"name": "cron", "executionMode": "long-running", "schedule": schedule}), 400)
    assert body["error"].startswith("invalid 'schedule'")
    assert agent_names(org_a) == []


def test_64_tools_are_accepted_and_duplicates_do_not_count(org_a):
    for i in range(64):  # 64 distinct tool names that resolve: the org's other agents
        assert post(org_a.client, {"name": f"t{i}"}).status_code == 201
    tools = [f"agent_t{i}" for i in range(64)] + ["agent_t0", " agent_t1 "]
    assert post(org_a.client, {"name": "many", "tools": tools}).json()["tools"] == [f"agent_t{i}" for i in range(64)]


def test_instructions_at_the_limit_are_accepted(org_a):
    assert post(org_a.client, {"name": "big", "instructions": "x" * (32 * 1024)}).status_code == 201


def test_duplicate_name_is_409(org_a):
    assert post(org_a.client, {"name": "dup"}).status_code == 201
    assert_error(post(org_a.client, {"name": "dup"}), 409, "agent already exists in this org", "agent_exists")
    assert agent_names(org_a) == ["dup"]


def test_same_name_in_two_orgs_is_fine(org_a, org_b):
    assert post(org_a.client, {"name": "twin"}).status_code == 201
    assert post(org_b.client, {"name": "twin"}).status_code == 201


def test_long_running_agent_echoes_its_schedule_and_next_run(org_a):
    body = post(org_a.client, {"name": "cron", "executionMode": "long-running", "schedule": " */5  * * * * ", "timezone": "Europe/Paris"}).json()
    assert body["executionMode"] == "long-running" and body["schedule"] == "*/5 * * * *"
    assert body["timezone"] == "Europe/Paris" and body["nextRunAt"].endswith("Z")


def test_one_shot_drops_the_schedule(org_a):
    body = post(org_a.client, {"name": "once", "executionMode": "one-shot", "schedule": "* * * * *"}).json()
    assert "schedule" not in body
    with org_a.context():
        assert Agent.objects.get(name="once").schedule == ""


def test_long_running_cap_per_org(org_a, org_b, settings):
    settings.CLOUD_AGENT_MAX_LONG_RUNNING = 2
    lr = {"executionMode": "long-running", "schedule": "* * * * *"}
    assert post(org_a.client, {"name": "lr1", **lr}).status_code == 201
    assert post(org_a.client, {"name": "lr2", **lr}).status_code == 201
    assert_error(post(org_a.client, {"name": "lr3", **lr}), 409, "long-running agent limit reached for this org (max 2)", "long_running_limit")
    assert post(org_a.client, {"name": "oneshot"}).status_code == 201
    assert post(org_b.client, {"name": "lr1", **lr}).status_code == 201
    # A patch into long-running is capped too; re-saving an existing one is not.
    assert_error(patch(org_a.client, "oneshot", lr), 409)
    with org_a.context():
        assert Agent.objects.get(name="oneshot").execution_mode == "one-shot"
    assert patch(org_a.client, "lr1", {"schedule": "*/2 * * * *"}).status_code == 200
    assert agent_names(org_a) == ["lr1", "lr2", "oneshot"]


def test_patch_changes_only_given_fields(org_a):
    post(org_a.client, {"name": "p", "instructions": "keep", "description": "old", "tools": ["calculator"]})
    response = patch(org_a.client, "p", {"description": "new", "tools": []})
    assert response.status_code == 200
    body = response.json()
    assert body["description"] == "new" and body["tools"] == []
    with org_a.context():
        agent = Agent.objects.get(name="p")
        assert agent.instructions == "keep" and agent.updated_at >= agent.created_at


def test_patch_revalidates_mode_and_schedule_together(org_a):
    post(org_a.client, {"name": "p"})
    assert_error(patch(org_a.client, "p", {"executionMode": "long-running"}), 400, "a long-running agent requires a 'schedule' (5-field cron)")
    assert patch(org_a.client, "p", {"executionMode": "long-running", "schedule": "0 * * * *"}).status_code == 200
    assert_error(patch(org_a.client, "p", {"schedule": "@hourly"}), 400)
    with org_a.context():
        assert Agent.objects.get(name="p").schedule == "0 * * * *"


def test_patch_refuses_empty_model_and_renames(org_a):
    post(org_a.client, {"name": "p"})
    assert_error(patch(org_a.client, "p", {"model": " "}), 400, "model cannot be empty")
    assert_error(patch(org_a.client, "p", {"name": "q"}), 400, "name is immutable")
    assert agent_names(org_a) == ["p"]


def test_delete_removes_agent_and_runs(org_a):
    post(org_a.client, {"name": "gone"})
    with org_a.context():
        agent = Agent.objects.get(name="gone")
        Run.objects.create(id="run_1", agent=agent, agent_name="gone", status=RunStatus.OK, created_at=agent.created_at, finished_at=agent.created_at)
    response = org_a.client.delete("/v1/agents/gone")
    assert response.status_code == 204 and response.content == b""
    with org_a.context():
        assert not Agent.objects.exists() and not Run.objects.exists()
    assert_error(org_a.client.get("/v1/agents/gone"), 404)


def test_model_is_checked_against_the_gateway_catalog(org_a, upstream):
    upstream.models = ["test-model", "best"]
    body = assert_error(post(org_a.client, {"name": "m", "model": "nope"}), 400)
    assert body["error"] == 'model "nope" is not in this gateway\'s catalog'
    assert post(org_a.client, {"name": "m", "model": "best"}).json()["model"] == "best"
    assert post(org_a.client, {"name": "d"}).json()["model"] == "test-model"
    assert_error(patch(org_a.client, "m", {"model": "nope"}), 400)
    assert agent_names(org_a) == ["d", "m"]


def test_catalog_check_fails_open_when_gateway_lists_nothing(org_a, upstream):
    upstream.models = []
    assert post(org_a.client, {"name": "m", "model": "anything"}).status_code == 201


def test_malformed_json_is_400(org_a):
    assert_error(post(org_a.client, "{not json"), 400, code="invalid_request")
    assert agent_names(org_a) == []


def test_wrong_field_types_are_400_with_fields(org_a):
    body = assert_error(post(org_a.client, {"name": 5, "tools": "x"}), 400, code="invalid_request")
    assert {f["field"] for f in body["fields"]} >= {"body.payload.name", "body.payload.tools"}
    assert agent_names(org_a) == []


def test_oversized_body_is_refused_in_the_error_shape(org_a):
    body = assert_error(post(org_a.client, json.dumps({"name": "big", "description": "x" * (1024 * 1024)})), 413, code="payload_too_large")
    assert body["error"] == "request body too large"
    assert agent_names(org_a) == []


def test_openapi_and_docs_are_served(client):
    spec = client.get("/v1/agents/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert "/v1/agents" in paths and "/v1/agents/{ref}" in paths
    docs = client.get("/v1/agents/docs")
    assert docs.status_code == 200 and b"openapi.json" in docs.content


def test_schedule_that_never_fires_is_400_and_the_list_keeps_working(org_a):
    # 31 February parses, but has no next fire time: storing it made every GET /v1/agents a 500.
    body = {"name": "feb", "executionMode": "long-running", "schedule": "0 0 31 2 *"}
    assert_error(post(org_a.client, body), 400, "invalid 'schedule': it never fires")
    assert agent_names(org_a) == []
    assert org_a.client.get("/v1/agents").status_code == 200
    assert post(org_a.client, {**body, "schedule": "0 0 29 2 *"}).status_code == 201  # leap days fire


def test_reference_cron_grammar_is_accepted(org_a):
    for i, schedule in enumerate(["*/5 * * * *", "0 9 * * 1-5", "0,30 8-18/2 1-31/3 */2 0,6", "0 0 * * */7"]):
        body = {"name": f"c{i}", "executionMode": "long-running", "schedule": schedule}
        assert post(org_a.client, body).status_code == 201, schedule


def test_patch_null_fields_are_omitted_not_cleared(org_a):
    lr = {"executionMode": "long-running", "schedule": "0 * * * *", "timezone": "Europe/Paris"}
    post(org_a.client, {"name": "p", "instructions": "keep", "tools": ["calculator"], "description": "old", **lr})
    nulls = dict.fromkeys(["model", "instructions", "tools", "executionMode", "schedule", "timezone", "computeRef"])
    response = patch(org_a.client, "p", {**nulls, "description": "new"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["executionMode"] == "long-running" and body["schedule"] == "0 * * * *" and body["timezone"] == "Europe/Paris"
    with org_a.context():
        agent = Agent.objects.get(name="p")
        assert (agent.instructions, agent.tools, agent.description) == ("keep", ["calculator"], "new")
        assert (agent.execution_mode, agent.schedule, agent.timezone) == ("long-running", "0 * * * *", "Europe/Paris")


def test_create_null_fields_take_their_defaults(org_a, settings):
    settings.AGENTS_DEFAULT_MODEL = "house-model"
    body = post(org_a.client, {"name": "n", "model": None, "tools": None, "executionMode": None, "timezone": None}).json()
    assert body["model"] == "house-model" and body["tools"] == [] and body["executionMode"] == "one-shot" and body["timezone"] == "UTC"


@pytest.mark.parametrize("field", ["instructions", "description", "model", "computeRef", "tools"])
def test_nul_character_is_400_with_its_field_and_writes_nothing(org_a, field):
    value = ["a\u0000b"] if field == "tools" else "a\u0000b"
    body = assert_error(post(org_a.client, {"name": "nul", field: value}), 400, code="invalid_request")
    assert body["fields"] == [{"field": f"{field}.0" if field == "tools" else field, "message": "must not contain a NUL character (U+0000)"}]
    assert agent_names(org_a) == []


def test_model_longer_than_its_column_is_400(org_a):
    assert_error(post(org_a.client, {"name": "m", "model": "m" * 201}), 400, "model too long")
    assert post(org_a.client, {"name": "m", "model": "m" * 200}).status_code == 201
    assert_error(patch(org_a.client, "m", {"model": "m" * 201}), 400, "model too long")
    with org_a.context():
        assert Agent.objects.get(name="m").model == "m" * 200


def test_patch_of_an_unknown_agent_with_a_bad_model_is_404(org_a):
    assert_error(patch(org_a.client, "ghost", {"model": "m" * 201}), 404, "agent not found")
