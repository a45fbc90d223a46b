"""The OpenAPI document of /v1/agents says what the API does, in words written for its users.

The behaviour itself is held by schemathesis in test_contract.py; these tests pin what a
reader of the document relies on: the shared answers, the Authorize button, the vocabulary's
enums, required fields, unique schema names and descriptions free of internal references.
"""

from __future__ import annotations

import json
import re

import pytest
from ninja import Schema

from agents_site.vocabulary import ApprovalState, ActivityKind, ControlCommand, EventKind, ExecutionMode, MetricsRange, RunStatus, SessionStatus, TargetKind, TargetStatus


@pytest.fixture
def document(client) -> dict:
    return client.get("/v1/agents/openapi.json").json()


def _operations(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def _schema(document, name):
    return document["components"]["schemas"][name]


def _enum(prop: dict) -> list:
    for branch in prop.get("anyOf", [prop]):
        if "enum" in branch:
            return branch["enum"]
    raise AssertionError(f"no enum in {prop}")


def test_the_security_scheme_is_a_bearer_api_key_on_every_route_but_the_public_ones(document):
    assert document["components"]["securitySchemes"] == {
        "bearerAuth": {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "ak_…",
            "description": "An API key of your org (`ak_` + 48 hex characters), sent as `Authorization: Bearer ak_…`.",
        }
    }
    for method, path, operation in _operations(document):
        # the gallery; the presets (reference §8.1); a share link's read, whose token is its only credential (issue 57)
        public = path.startswith("/v1/agents/builds") or path in ("/v1/agents/chat/presets", "/v1/agents/chat/shares/read")
        assert ("security" in operation) is not public, (method, path)
        if not public:
            assert operation["security"] == [{"bearerAuth": []}]


def test_every_operation_declares_the_answers_the_api_gives_around_it(document):
    for method, path, operation in _operations(document):
        declared = set(operation["responses"])
        if operation.get("security"):
            assert {"403", "503"} <= declared, (method, path)
        if operation.get("parameters") or operation.get("requestBody"):
            assert "400" in declared, (method, path)
        if operation.get("requestBody"):
            assert "413" in declared, (method, path)
        if "{" in path:
            assert "404" in declared, (method, path)
        for status, answer in operation["responses"].items():
            assert answer["description"] and answer["description"] != "Unknown Status Code", (method, path, status)
            if int(status) >= 400 and status != "502":
                schema = answer["content"]["application/json"]["schema"]
                refs = [s["$ref"].rsplit("/", 1)[1] for s in schema.get("anyOf", [schema])]
                if status == "400" and set(refs) in ({"RunOut", "ErrorOut"}, {"RoundFailedOut", "ErrorOut"}):
                    continue  # a context overflow is the failed run's (round's) body with its code (decision 1530)
                assert refs in (["ErrorOut"], ["SecretErrorOut"]), (method, path, status)


def test_the_answers_schemathesis_found_undeclared_are_declared(document):
    paths = document["paths"]
    assert "404" in paths["/v1/agents/{ref}"]["get"]["responses"]
    assert "400" in paths["/v1/agents/billing"]["get"]["responses"]
    assert "403" in paths["/v1/agents/targets/{target_id}/claim"]["post"]["responses"]
    assert "409" in paths["/v1/agents/targets/{target_id}"]["patch"]["responses"]


def test_enumerated_fields_are_the_vocabularys_enums(document):
    def prop(schema, name):
        return _schema(document, schema)["properties"][name]

    assert _enum(prop("AgentIn", "executionMode")) == list(ExecutionMode.values)
    assert _enum(prop("AgentOut", "executionMode")) == list(ExecutionMode.values)
    assert _enum(prop("RunOut", "status")) == list(RunStatus.values)
    assert _enum(prop("SessionIn", "status")) == list(SessionStatus.values)
    assert _enum(prop("SessionOut", "status")) == list(SessionStatus.values)
    event_in, batch_in = document["paths"]["/v1/agents/sessions/{id}/events"]["post"]["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    # A caller appends every kind but `approval` (recorded only by the run that asks); a read shows them all.
    assert _enum(event_in["properties"]["kind"]) == list(EventKind.APPENDABLE)
    assert _enum(batch_in["properties"]["events"]["items"]["properties"]["kind"]) == list(EventKind.APPENDABLE)
    assert _enum(prop("EventOut", "kind")) == list(EventKind.values)
    assert _enum(prop("ApprovalOut", "state")) == list(ApprovalState.values)
    assert _enum(prop("ControlOut", "command")) == list(ControlCommand.values)
    assert _enum(prop("TargetIn", "kind")) == list(TargetKind.values)
    assert _enum(prop("TargetOut", "status")) == list(TargetStatus.values)
    assert _enum(prop("ActivityItemOut", "kind")) == list(ActivityKind.values)
    assert _enum(prop("MetricsOut", "range")) == list(MetricsRange.values)
    [range_param] = document["paths"]["/v1/agents/metrics"]["get"]["parameters"]
    assert range_param["schema"]["enum"] == list(MetricsRange.values)


def test_required_fields_limits_formats_and_booleans_are_declared(document):
    agent = _schema(document, "AgentCreateIn")
    assert "name" in agent["required"] and agent["properties"]["name"]["type"] == "string"
    assert agent["properties"]["name"]["pattern"] == r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
    assert agent["then"]["required"] == ["schedule"]  # long-running needs a schedule
    session = _schema(document, "SessionIn")
    assert "agent" in session["required"] and session["properties"]["agent"]["maxLength"] == 128
    assert session["then"]["required"] == ["project"]  # published needs a project
    terminal = session["properties"]["terminal"]["anyOf"][0]
    assert terminal["maxLength"] == 512 and terminal["pattern"].startswith("^$|^https://")
    assert "label" in _schema(document, "TargetCreateIn")["required"]
    message = document["paths"]["/v1/agents/sessions/{id}/message"]["post"]["requestBody"]
    assert message["required"] is True
    assert [branch["required"] for branch in message["content"]["application/json"]["schema"]["anyOf"]] == [["message"], ["payload"]]
    assert _schema(document, "RunIn")["properties"]["background"]["anyOf"][0] == {"type": "boolean"}
    assert _schema(document, "SessionPatchIn")["properties"]["published"]["anyOf"][0] == {"type": "boolean"}


def test_schema_names_are_unique_so_no_shape_is_published_under_another(document):
    classes: dict[str, set[str]] = {}
    stack = list(Schema.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.split(".")[0] in {"agents", "agents_site", "server", "sessions", "targets", "billing"}:
            classes.setdefault(cls.__name__, set()).add(f"{cls.__module__}.{cls.__qualname__}")
    published = set(document["components"]["schemas"])
    clashes = {name: where for name, where in classes.items() if name in published and len(where) > 1}
    assert clashes == {}
    metrics = _schema(document, "TargetOut")["properties"]["metrics"]["anyOf"][0]["$ref"]
    assert metrics == "#/components/schemas/TargetMetricsOut"


INTERNAL = re.compile(r"spec 0\d\d|§|\breference\b|\bissue \d|\bDESIGN\b|\b(?:agents|sessions|targets|billing|tenancy|agents_site)\.[a-z_]+\b|django-q2|ninja", re.IGNORECASE)


def test_descriptions_are_written_for_users_without_internal_references(document):
    texts = []

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("description", "summary", "title") and isinstance(value, str):
                    texts.append((where, value))
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}/{i}")

    walk(document, "")
    leaks = [(where, INTERNAL.search(text).group(0)) for where, text in texts if INTERNAL.search(text)]
    assert leaks == []
    assert json.dumps(document).count("spec 003") == 0


def test_a_recorded_run_links_to_the_route_that_reads_it_again(document):
    run = document["paths"]["/v1/agents/{ref}/run"]["post"]["responses"]
    get_run = document["paths"]["/v1/agents/runs/{run_id}"]["get"]["operationId"]
    for status in ("200", "502"):
        assert run[status]["links"]["GetRun"] == {"operationId": get_run, "parameters": {"run_id": "$response.body#/id"}}


def test_every_generated_document_is_the_same_and_names_only_components_it_holds():
    """The completion of the document must not change the routes' own dicts: a second
    generation in the same process once lost the stream components its `$ref`s named."""
    from server.api import api

    first, second = api.get_openapi_schema(), api.get_openapi_schema()
    assert first == second
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(second)))
    assert {"ChatStreamFrame", "RunStreamFrame"} <= refs <= set(second["components"]["schemas"])
