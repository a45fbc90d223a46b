"""Session routes over HTTP: create, list, detail, patch, tree, events (spec 003; reference §2.3)."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from sessions import services
from sessions.models import Event, Session
from tenancy import stores
from tests.sessions.conftest import append, new_session, patch, post

pytestmark = pytest.mark.both_stores

ID_RE = re.compile(r"^sess_[0-9a-f]{32}$")
EVT_RE = re.compile(r"^evt_[0-9a-f]{32}$")
BASE = "/v1/agents/sessions"


def _count(org, model=Session, **filters) -> int:
    with org.context():
        return model.objects.filter(**filters).count()


# --- create ----------------------------------------------------------------------------


def test_create_opens_a_root_session_attributed_to_the_caller(org_a):
    response = post(org_a.client, BASE, {"agent": "  coder  ", "title": "  build the shop  "})
    assert response.status_code == 201
    body = response.json()
    assert ID_RE.match(body["id"])
    assert body["rootSessionId"] == body["id"] and "parentSessionId" not in body
    assert body["agent"] == "coder" and body["title"] == "build the shop"
    assert body["status"] == "running" and body["events"] == 0 and body["children"] == 0
    assert body["org"] == org_a.slug and body["actor"] == f"{org_a.slug}/{org_a.user.username}"
    assert "endedAt" not in body and "published" not in body
    with org_a.context():
        stored = Session.objects.get(pk=body["id"])
    assert (stored.agent, stored.root_id, stored.parent_id, stored.ended_at) == ("coder", body["id"], "", None)


def test_subagents_inherit_the_root_of_their_flow(org_a):
    root = new_session(org_a)
    child = new_session(org_a, parentSessionId=root["id"])
    grandchild = new_session(org_a, parentSessionId=child["id"])
    assert child["parentSessionId"] == root["id"] and child["rootSessionId"] == root["id"]
    assert grandchild["parentSessionId"] == child["id"] and grandchild["rootSessionId"] == root["id"]
    with org_a.context():
        assert set(Session.objects.filter(root_id=root["id"]).values_list("id", flat=True)) == {root["id"], child["id"], grandchild["id"]}


@pytest.mark.parametrize("parent", ["foreign", "sess_" + "0" * 32])  # a malformed id: tests/agents_site/test_id_fields.py
def test_parent_unknown_or_in_another_org_is_400_and_nothing_is_stored(org_a, org_b, parent):
    if parent == "foreign":
        parent = new_session(org_b)["id"]
    response = post(org_a.client, BASE, {"agent": "coder", "parentSessionId": parent})
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "parentSessionId not found in this org"}
    assert _count(org_a) == 0


def test_registering_with_a_terminal_status_records_a_finished_session(org_a):
    body = new_session(org_a, status="done")
    assert body["status"] == "done" and body["endedAt"]
    with org_a.context():
        assert Session.objects.get(pk=body["id"]).ended_at is not None
    refused = post(org_a.client, f"{BASE}/{body['id']}/pause")
    assert refused.status_code == 409 and refused.json()["code"] == "session_finished"


def test_create_keeps_an_https_terminal_trimmed(org_a):
    body = new_session(org_a, terminal="  https://term.example.com/s/1  ")
    assert body["terminal"] == "https://term.example.com/s/1"


BAD_CREATES = [
    ({}, "agent is required"),
    ({"agent": "   "}, "agent is required"),
    ({"agent": "a" * 129}, "agent too long"),
    ({"title": "t" * 513}, "title too long"),
    ({"status": "finished"}, "status must be running|paused|done|error"),
    ({"taskWorkflowId": "w" * 257}, "task workflow/run reference too long"),
    ({"taskRunId": "r" * 257}, "task workflow/run reference too long"),
    ({"host": "h" * 257}, "host too long"),
    ({"cwd": "c" * 1025}, "cwd too long"),
    ({"repo": "r" * 513}, "repo too long"),
    ({"target": "tgt_" + "0" * 32}, "target not found in this org"),
    ({"terminal": "javascript:alert(1)"}, "terminal url must be https"),
    ({"terminal": "https://t.example/s\x1c1"}, "terminal url must be https"),  # a control character in the path
    ({"terminal": "http://term.example.com"}, "terminal url must be https"),
    ({"terminal": "//term.example.com"}, "terminal url must be https"),
    ({"terminal": "file:///etc/passwd"}, "terminal url must be https"),
    ({"terminal": "https://"}, "terminal url must be https"),
    ({"terminal": "https://e.com/" + "x" * 500}, "terminal url too long"),
    ({"provider": "p" * 65}, "provider too long"),
    ({"account": "a" * 257}, "account too long"),
    ({"project": "p" * 129}, "project too long"),
    ({"actor": "a" * 257}, "actor too long"),
    ({"published": True}, "published requires a project — a build with no product is not a story anyone can open"),
]


@pytest.mark.parametrize("extra, message", BAD_CREATES)
def test_create_refuses_bad_input_and_stores_nothing(org_a, extra, message):
    body = {"agent": "coder", **extra} if "agent" not in extra and extra else extra
    response = post(org_a.client, BASE, body)
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": message}
    assert _count(org_a) == 0


def test_create_with_a_malformed_body_is_400(org_a):
    response = post(org_a.client, BASE, "{not json")
    assert response.status_code == 400 and response.json()["status"] == 400
    assert _count(org_a) == 0


def test_sessions_need_a_validated_principal(db):
    response = Client().get(BASE)
    assert response.status_code == 403
    assert response.json() == {"status": 403, "code": "forbidden", "error": "a validated principal is required"}


# --- list --------------------------------------------------------------------------------


def test_list_shows_roots_newest_first_with_counts_and_a_preview(org_a):
    older = new_session(org_a, agent="first")
    newer = new_session(org_a, agent="second")
    child = new_session(org_a, parentSessionId=older["id"])
    append(org_a, older["id"], payload={"text": "x" * 600})
    append(org_a, child["id"], payload={"text": "child"})
    response = org_a.client.get(BASE)
    assert response.status_code == 200
    sessions = response.json()["sessions"]
    assert [s["id"] for s in sessions] == [newer["id"], older["id"]]
    listed = sessions[1]
    assert listed["events"] == 1 and listed["children"] == 1
    preview = listed["lastEvent"]["preview"]
    assert len(preview.encode()) == 240 and preview == ('{"text":"' + "x" * 600)[:240]
    assert listed["lastEvent"]["seq"] == 1 and listed["lastEvent"]["kind"] == "message"
    assert "lastEvent" not in sessions[0] and sessions[0]["events"] == 0


def test_list_preview_cuts_bytes_not_characters(org_a):
    session = new_session(org_a)
    append(org_a, session["id"], payload="é" * 300)
    preview = org_a.client.get(BASE).json()["sessions"][0]["lastEvent"]["preview"]
    assert preview == ('"' + "é" * 300)[: len(preview)] and len(preview.encode()) <= 240


def test_list_descends_with_root_and_parent(org_a):
    root = new_session(org_a)
    child = new_session(org_a, parentSessionId=root["id"])
    grandchild = new_session(org_a, parentSessionId=child["id"])
    other = new_session(org_a)
    flow = org_a.client.get(BASE, {"root": root["id"]}).json()["sessions"]
    assert {s["id"] for s in flow} == {root["id"], child["id"], grandchild["id"]}
    direct = org_a.client.get(BASE, {"parent": root["id"]}).json()["sessions"]
    assert [s["id"] for s in direct] == [child["id"]] and direct[0]["children"] == 1
    roots = org_a.client.get(BASE).json()["sessions"]
    assert {s["id"] for s in roots} == {root["id"], other["id"]}


def test_list_filters_by_status_and_project(org_a):
    done = new_session(org_a, status="done", project="shop")
    new_session(org_a, project="blog")
    by_status = org_a.client.get(BASE, {"status": "done"}).json()["sessions"]
    assert [s["id"] for s in by_status] == [done["id"]]
    by_project = org_a.client.get(BASE, {"project": "shop"}).json()["sessions"]
    assert [s["id"] for s in by_project] == [done["id"]]
    bad = org_a.client.get(BASE, {"status": "finished"})
    assert bad.status_code == 400 and bad.json()["error"] == "status must be running|paused|done|error"


def test_list_limit_defaults_to_100_is_clamped_to_500_and_below_1_is_400(org_a):
    with org_a.context():
        for _ in range(102):
            services.session_create(agent="bulk", actor="t")
    assert len(org_a.client.get(BASE, {"limit": 2}).json()["sessions"]) == 2
    assert len(org_a.client.get(BASE).json()["sessions"]) == 100
    assert org_a.client.get(BASE, {"limit": 0}).status_code == 400
    assert len(org_a.client.get(BASE, {"limit": 501}).json()["sessions"]) == 102
    assert len(org_a.client.get(BASE, {"limit": 500}).json()["sessions"]) == 102


def test_list_reads_the_store_in_two_queries_however_many_sessions(org_a):
    for _ in range(5):
        session = new_session(org_a)
        new_session(org_a, parentSessionId=session["id"])
        append(org_a, session["id"], payload={"text": "hi"})
    org_a.client.get(BASE)  # warm: the store is open
    alias = stores.open_store(org_a.slug)
    with CaptureQueriesContext(connections[alias]) as queries:
        response = org_a.client.get(BASE)
    assert response.status_code == 200 and len(response.json()["sessions"]) == 5
    assert len(queries.captured_queries) == 2


def test_list_is_org_scoped(org_a, org_b):
    new_session(org_a)
    assert org_b.client.get(BASE).json() == {"sessions": []}


# --- detail ------------------------------------------------------------------------------


def test_detail_has_direct_children_and_the_50_newest_events_oldest_first(org_a):
    session = new_session(org_a)
    child = new_session(org_a, parentSessionId=session["id"])
    new_session(org_a, parentSessionId=child["id"])
    with org_a.context():
        for n in range(55):
            services.session_append_event(session_id=session["id"], kind="log", payload={"n": n}, actor="t")
    body = org_a.client.get(f"{BASE}/{session['id']}").json()
    assert [e["seq"] for e in body["recentEvents"]] == list(range(6, 56))
    assert body["recentEvents"][0]["payload"] == {"n": 5}
    assert body["events"] == 55 and body["lastEvent"]["seq"] == 55
    assert [c["id"] for c in body["childSessions"]] == [child["id"]] and body["childSessions"][0]["children"] == 1


@pytest.mark.parametrize("ref", ["foreign", "sess_" + "0" * 32, "s" * 129])
def test_detail_of_a_foreign_unknown_or_overlong_id_is_404(org_a, org_b, ref):
    if ref == "foreign":
        ref = new_session(org_b)["id"]
    for path in (f"{BASE}/{ref}", f"{BASE}/{ref}/tree", f"{BASE}/{ref}/control"):
        response = org_a.client.get(path)
        assert response.status_code == 404
        assert response.json() == {"status": 404, "code": "not_found", "error": "session not found"}
    for path, body in ((f"{BASE}/{ref}/events", {"kind": "log"}), (f"{BASE}/{ref}/pause", {})):
        response = post(org_a.client, path, body)
        assert response.status_code == 404 and response.json()["error"] == "session not found"
    assert _count(org_a, Event) == 0


# --- patch -------------------------------------------------------------------------------


def test_patch_changes_given_fields_and_keeps_the_rest(org_a):
    session = new_session(org_a, title="old", project="shop", terminal="https://t.example.com")
    response = patch(org_a.client, f"{BASE}/{session['id']}", {"title": "new", "status": "paused"})
    assert response.status_code == 200
    body = response.json()
    assert (body["title"], body["status"], body["project"], body["terminal"]) == ("new", "paused", "shop", "https://t.example.com")
    with org_a.context():
        stored = Session.objects.get(pk=session["id"])
    assert (stored.title, stored.status, stored.project) == ("new", "paused", "shop")


def test_patch_detaches_a_terminal_with_blank(org_a):
    session = new_session(org_a, terminal="https://t.example.com")
    body = patch(org_a.client, f"{BASE}/{session['id']}", {"terminal": ""}).json()
    assert "terminal" not in body
    assert _count(org_a, terminal="") == 1


def test_a_finished_session_never_reopens(org_a):
    session = new_session(org_a)
    done = patch(org_a.client, f"{BASE}/{session['id']}", {"status": "done"}).json()
    assert done["status"] == "done" and done["endedAt"]
    for status in ("running", "paused", "error"):
        response = patch(org_a.client, f"{BASE}/{session['id']}", {"status": status})
        assert response.status_code == 409
        assert response.json() == {"status": 409, "code": "session_finished", "error": "session is done; cannot change status"}
    assert _count(org_a, status="done") == 1
    again = patch(org_a.client, f"{BASE}/{session['id']}", {"status": "done", "title": "kept"})
    assert again.status_code == 200 and again.json()["endedAt"] == done["endedAt"]


def test_publishing_needs_a_project(org_a):
    session = new_session(org_a)
    refused = patch(org_a.client, f"{BASE}/{session['id']}", {"published": True})
    assert refused.status_code == 400 and refused.json()["error"].startswith("published requires a project")
    assert _count(org_a, published=True) == 0
    published = patch(org_a.client, f"{BASE}/{session['id']}", {"published": True, "project": "shop"}).json()
    assert published["published"] is True and published["project"] == "shop"
    unpublished = patch(org_a.client, f"{BASE}/{session['id']}", {"published": False}).json()
    assert "published" not in unpublished
    assert _count(org_a, published=False, project="shop") == 1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"status": "closed"}, "status must be running|paused|done|error"),
        ({"terminal": "javascript:alert(1)"}, "terminal url must be https"),
        ({"terminal": "http://t.example.com"}, "terminal url must be https"),
        ({"terminal": "//t.example.com"}, "terminal url must be https"),
        ({"title": "t" * 513}, "title too long"),
        ({"target": "tgt_" + "f" * 32}, "target not found in this org"),
        ({"project": "p" * 129}, "project too long"),
    ],
)
def test_patch_refuses_bad_input_and_changes_nothing(org_a, change, message):
    session = new_session(org_a, title="kept")
    response = patch(org_a.client, f"{BASE}/{session['id']}", {"title": "changed", **change})
    assert response.status_code == 400 and response.json()["error"] == message
    with org_a.context():
        stored = Session.objects.get(pk=session["id"])
    assert stored.title == "kept" and (stored.status, stored.terminal, stored.project, stored.target) == ("running", "", "", "")


def test_clearing_the_project_of_a_published_session_is_refused(org_a):
    session = new_session(org_a, project="shop", published=True)
    response = patch(org_a.client, f"{BASE}/{session['id']}", {"project": "", "title": "changed"})
    assert response.status_code == 400 and response.json()["error"].startswith("published requires a project")
    assert _count(org_a, published=True, project="shop", title="") == 1
    cleared = patch(org_a.client, f"{BASE}/{session['id']}", {"project": "", "published": False}).json()
    assert "project" not in cleared and "published" not in cleared


def test_patch_of_another_orgs_session_is_404(org_a, org_b):
    session = new_session(org_b)
    response = patch(org_a.client, f"{BASE}/{session['id']}", {"title": "x"})
    assert response.status_code == 404
    assert _count(org_b, title="x") == 0


# --- tree --------------------------------------------------------------------------------


def test_tree_nests_the_flow_with_null_leaves(org_a):
    root = new_session(org_a)
    a = new_session(org_a, parentSessionId=root["id"])
    b = new_session(org_a, parentSessionId=root["id"])
    a1 = new_session(org_a, parentSessionId=a["id"])
    append(org_a, a1["id"], payload={"text": "deep"})
    tree = org_a.client.get(f"{BASE}/{root['id']}/tree").json()
    assert tree["session"]["id"] == root["id"] and tree["session"]["children"] == 2
    assert [n["session"]["id"] for n in tree["children"]] == [a["id"], b["id"]]
    assert tree["children"][1]["children"] is None
    leaf = tree["children"][0]["children"][0]
    assert leaf["session"]["id"] == a1["id"] and leaf["session"]["events"] == 1 and leaf["children"] is None
    subtree = org_a.client.get(f"{BASE}/{a['id']}/tree").json()
    assert subtree["session"]["id"] == a["id"] and [n["session"]["id"] for n in subtree["children"]] == [a1["id"]]


def test_tree_is_one_indexed_read_of_the_flow(org_a):
    root = new_session(org_a)
    for _ in range(4):
        child = new_session(org_a, parentSessionId=root["id"])
        new_session(org_a, parentSessionId=child["id"])
    alias = stores.open_store(org_a.slug)
    with CaptureQueriesContext(connections[alias]) as queries:
        response = org_a.client.get(f"{BASE}/{root['id']}/tree")
    assert response.status_code == 200 and len(response.json()["children"]) == 4
    assert len(queries.captured_queries) == 2  # the session, then its whole flow


# --- events ------------------------------------------------------------------------------


def test_append_answers_201_with_the_stored_event_and_a_dense_seq(org_a):
    session = new_session(org_a)
    first = append(org_a, session["id"], "message", {"text": "hi", "nested": {"none": None, "list": [1, 2.5, True]}})
    assert EVT_RE.match(first["id"]) and first["seq"] == 1 and first["sessionId"] == session["id"]
    assert first["payload"] == {"text": "hi", "nested": {"none": None, "list": [1, 2.5, True]}}
    assert first["actor"] == f"{org_a.slug}/{org_a.user.username}"
    second = append(org_a, session["id"], "tool-call", actor="bot")
    third = append(org_a, session["id"], "status", "ünïcode ✓")
    assert (second["seq"], second["actor"], "payload" not in second) == (2, "bot", True)
    assert third["seq"] == 3 and third["payload"] == "ünïcode ✓"
    with org_a.context():
        stored = list(Event.objects.filter(session_id=session["id"]).order_by("seq").values_list("seq", "kind", "payload"))
        assert Session.objects.get(pk=session["id"]).last_seq == 3
    assert stored == [(1, "message", json.dumps(first["payload"], separators=(",", ":"))), (2, "tool-call", ""), (3, "status", '"ünïcode ✓"')]


@pytest.mark.parametrize("kind", ["message", "tool-call", "spawn", "log", "status"])
def test_every_kind_of_turn_is_admitted(org_a, kind):
    session = new_session(org_a)
    assert append(org_a, session["id"], kind, {"k": kind})["kind"] == kind


def test_a_control_turn_carrying_a_command_is_admitted_and_polled(org_a):
    session = new_session(org_a)
    assert append(org_a, session["id"], "control", {"command": "pause", "message": "hold"})["kind"] == "control"
    polled = org_a.client.get(f"{BASE}/{session['id']}/control").json()
    assert polled == {"commands": [{"seq": 1, "command": "pause", "message": "hold"}], "cursor": 1}


@pytest.mark.parametrize("payload", [{"k": "control"}, {"command": "dance"}, {"command": "stop", "message": 5}, "stop", None, {"command": {}}, {"command": ["stop"]}])
def test_a_control_turn_that_is_not_a_command_is_refused(org_a, payload):
    # The control poll hands control turns to the running executor: each must be a command.
    session = new_session(org_a)
    response = org_a.client.post(f"{BASE}/{session['id']}/events", {"kind": "control", "payload": payload}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("a control turn's payload is {command, message?, payload?}")
    with org_a.context():
        assert not Event.objects.filter(session_id=session["id"]).exists()


def test_a_payload_of_exactly_64_kib_is_admitted(org_a):
    session = new_session(org_a)
    payload = "x" * (64 * 1024 - 2)  # its JSON text is the two quotes plus the characters
    assert append(org_a, session["id"], payload=payload)["seq"] == 1


@pytest.mark.parametrize(
    "body, message",
    [
        ({"kind": "thought"}, "kind must be message|tool-call|spawn|log|status|control|commit"),
        ({"payload": {"x": 1}}, "kind must be message|tool-call|spawn|log|status|control|commit"),
        ({"kind": "message", "payload": "x" * (64 * 1024 - 1)}, "payload too large"),
        ({"kind": "message", "actor": "a" * 257}, "actor too long"),
        ('{"kind": "message", "payload": {bad json}}', "payload must be valid JSON"),
        ("[1, 2]", "the body must be a JSON object"),
        ('{"kind": "message", "payload": NaN}', "payload must be valid JSON"),
    ],
)
def test_append_refuses_bad_input_and_stores_nothing(org_a, body, message):
    session = new_session(org_a)
    response = post(org_a.client, f"{BASE}/{session['id']}/events", body)
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": message}
    assert _count(org_a, Event) == 0 and _count(org_a, last_seq=0) == 1


@pytest.mark.parametrize(
    "raw",
    [
        '{"kind": "message", "payload": {"text": "\\ud800"}}',  # an unpaired surrogate no UTF-8 store can hold
        '{"kind": "message", "actor": "\\udfff"}',
        '{"kind": "message", "payload": ' + "[" * 5000 + "]" * 5000 + "}",  # deeper than the JSON reader goes
    ],
)
def test_append_refuses_a_body_no_store_can_hold_with_400(org_a, raw):
    session = new_session(org_a)
    response = post(org_a.client, f"{BASE}/{session['id']}/events", raw)
    assert response.status_code == 400
    body = response.json()
    assert body["status"] == 400 and body["code"] == "invalid_request" and set(body) == {"status", "code", "error"}
    assert _count(org_a, Event) == 0


def test_a_blank_actor_defaults_to_the_caller(org_a):
    session = new_session(org_a, actor="   ")
    event = append(org_a, session["id"], "log", actor="   ")
    caller = f"{org_a.slug}/{org_a.user.username}"
    assert session["actor"] == caller and event["actor"] == caller
    assert _count(org_a, actor=caller) == 1 and _count(org_a, Event, actor=caller) == 1


def test_append_to_another_orgs_session_is_404_and_stores_nothing(org_a, org_b):
    session = new_session(org_b)
    response = post(org_a.client, f"{BASE}/{session['id']}/events", {"kind": "message", "payload": {"text": "x"}})
    assert response.status_code == 404 and response.json()["error"] == "session not found"
    assert _count(org_b, Event) == 0 and _count(org_a, Event) == 0


def test_append_stamps_the_sessions_updated_at(org_a):
    session = new_session(org_a)
    with org_a.context():
        Session.objects.filter(pk=session["id"]).update(updated_at="2020-01-01T00:00:00Z")
    append(org_a, session["id"], payload={"text": "x"})
    listed = org_a.client.get(f"{BASE}/{session['id']}").json()
    assert listed["updatedAt"] > "2020-01-01T00:00:00Z"


def test_every_session_and_builds_route_of_spec_003_is_in_the_openapi_document(db):
    paths = Client().get("/v1/agents/openapi.json").json()["paths"]
    expected = {
        "/v1/agents/sessions": {"get", "post"},
        "/v1/agents/sessions/stream": {"get"},
        "/v1/agents/sessions/{id}": {"get", "patch"},
        "/v1/agents/sessions/{id}/tree": {"get"},
        "/v1/agents/sessions/{id}/events": {"post"},
        "/v1/agents/sessions/{id}/control": {"get"},
        "/v1/agents/sessions/{id}/pause": {"post"},
        "/v1/agents/sessions/{id}/resume": {"post"},
        "/v1/agents/sessions/{id}/stop": {"post"},
        "/v1/agents/sessions/{id}/message": {"post"},
        "/v1/agents/builds": {"get"},
        "/v1/agents/builds/{org}/{project}": {"get"},
    }
    for path, methods in expected.items():
        assert path in paths and methods <= set(paths[path]), path
    assert paths["/v1/agents/builds"]["get"].get("security") in (None, [])
    events = paths["/v1/agents/sessions/{id}/events"]["post"]
    single, batch = events["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
    assert "kind" in single["properties"] and single["not"] == {"required": ["events"]}
    assert batch["required"] == ["events"] and batch["properties"]["events"]["maxItems"] == 500
    assert batch["properties"]["events"]["items"]["properties"]["kind"] == single["properties"]["kind"]
    answers = events["responses"]["201"]["content"]["application/json"]["schema"]
    assert len(answers["anyOf"]) == 2


@pytest.mark.parametrize("published", [0, 1, "true", "yes", "false"])
def test_published_must_be_a_json_boolean(org_a, published):
    # `"published": 0` was once accepted.
    created = post(org_a.client, BASE, {"agent": "coder", "project": "shop", "published": published})
    assert created.status_code == 400 and created.json()["fields"][0]["field"].endswith("published")
    assert _count(org_a) == 0
    session = new_session(org_a, project="shop")
    changed = patch(org_a.client, f"{BASE}/{session['id']}", {"published": published})
    assert changed.status_code == 400 and created.json()["code"] == "invalid_request"
    with org_a.context():
        assert Session.objects.get(pk=session["id"]).published is False


# --- batch append (issue 16) ---------------------------------------------------------------


def _batch(org, session_id: str, events) -> object:
    return post(org.client, f"{BASE}/{session_id}/events", {"events": events})


def _stored(org, session_id: str) -> list[tuple]:
    with org.context():
        return list(Event.objects.filter(session_id=session_id).order_by("seq").values_list("seq", "kind", "actor", "payload"))


def test_a_batch_is_stored_in_order_with_dense_seqs_and_answered_as_a_list(org_a):
    session = new_session(org_a)
    append(org_a, session["id"], "log", {"before": True})
    response = _batch(org_a, session["id"], [
        {"kind": "message", "payload": {"text": "one"}},
        {"kind": "tool-call", "actor": "bot", "payload": {"name": "x"}},
        {"kind": "control", "payload": {"command": "pause"}},
        {"kind": "status"},
    ])
    assert response.status_code == 201, response.content
    events = response.json()["events"]
    caller = f"{org_a.slug}/{org_a.user.username}"
    assert [(e["seq"], e["kind"], e["actor"]) for e in events] == [(2, "message", caller), (3, "tool-call", "bot"), (4, "control", caller), (5, "status", caller)]
    assert events[0]["payload"] == {"text": "one"} and "payload" not in events[3]
    assert all(EVT_RE.match(e["id"]) and e["sessionId"] == session["id"] for e in events)
    assert [row[0] for row in _stored(org_a, session["id"])] == [1, 2, 3, 4, 5]
    with org_a.context():
        assert Session.objects.get(pk=session["id"]).last_seq == 5
        positions = list(Event.objects.filter(session_id=session["id"]).order_by("seq").values_list("position", flat=True))
    assert positions == [1, 2, 3, 4, 5]
    assert append(org_a, session["id"], "log")["seq"] == 6
    polled = org_a.client.get(f"{BASE}/{session['id']}/control").json()
    assert polled["commands"] == [{"seq": 4, "command": "pause"}]


def test_a_batch_of_500_is_admitted_and_501_is_400(org_a):
    session = new_session(org_a)
    response = _batch(org_a, session["id"], [{"kind": "log", "payload": {"n": n}} for n in range(500)])
    assert response.status_code == 201 and [e["seq"] for e in response.json()["events"]] == list(range(1, 501))
    assert [e["payload"]["n"] for e in response.json()["events"]] == list(range(500))
    refused = _batch(org_a, session["id"], [{"kind": "log"}] * 501)
    assert refused.status_code == 400 and refused.json()["error"] == "events must be a list of 1 to 500 events"
    assert _count(org_a, Event) == 500


@pytest.mark.parametrize(
    "events, index, message",
    [
        ([{"kind": "log"}, {"kind": "log"}, {"kind": "thought"}], 2, "events[2]: kind must be message|tool-call|spawn|log|status|control|commit"),
        ([{"kind": "log"}, "log"], 1, "events[1]: an event must be a JSON object"),
        ([{"kind": "log", "actor": 5}], 0, "events[0]: actor must be a string"),
        ([{"kind": "log"}, {"kind": "log", "actor": "a" * 257}], 1, "events[1]: actor too long"),
        ([{"kind": "log"}, {"kind": "message", "payload": "x" * (64 * 1024 - 1)}], 1, "events[1]: payload too large"),
        ([{"kind": "control", "payload": {"command": "pause"}}, {"kind": "control", "payload": {"command": "dance"}}], 1, None),
    ],
)
def test_an_invalid_event_refuses_the_whole_batch_with_400_naming_its_index(org_a, events, index, message):
    session = new_session(org_a)
    response = _batch(org_a, session["id"], events)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request" and body["index"] == index
    assert body["error"] == message if message else body["error"].startswith(f"events[{index}]: a control turn's payload is")
    assert _count(org_a, Event) == 0 and _count(org_a, last_seq=0) == 1


@pytest.mark.parametrize("events", [[], "x", {"kind": "log"}, None])
def test_a_batch_that_is_not_a_list_of_1_to_500_is_400(org_a, events):
    session = new_session(org_a)
    response = _batch(org_a, session["id"], events)
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "events must be a list of 1 to 500 events"}
    assert _count(org_a, Event) == 0


def test_a_credential_in_any_event_refuses_the_batch_with_422_naming_each_index(org_a):
    session = new_session(org_a)
    token = "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"
    response = _batch(org_a, session["id"], [
        {"kind": "log", "payload": {"text": "fine"}},
        {"kind": "message", "payload": {"text": f"push with {token}"}},
        {"kind": "log", "payload": "clean"},
        {"kind": "tool-call", "payload": {"env": f"GITHUB_TOKEN={token}"}},
    ])
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "secret_in_transcript" and "Nothing was stored" in body["error"]
    assert [f["index"] for f in body["findings"]] == [1, 3]
    assert all(token not in f["preview"] for f in body["findings"])
    assert _count(org_a, Event) == 0 and _count(org_a, last_seq=0) == 1
    single = post(org_a.client, f"{BASE}/{session['id']}/events", {"kind": "message", "payload": {"text": token}})
    assert single.status_code == 422 and "index" not in single.json()["findings"][0]


def test_a_batch_to_another_orgs_session_is_404_and_stores_nothing(org_a, org_b):
    session = new_session(org_b)
    response = _batch(org_a, session["id"], [{"kind": "log"}])
    assert response.status_code == 404
    assert _count(org_b, Event) == 0 and _count(org_a, Event) == 0
