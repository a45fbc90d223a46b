"""Cursor pagination (agents_site/pagination.py) and every list of /v1/agents walked to its end by cursor."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable
from urllib.parse import parse_qsl

import pytest
from django.utils import timezone

from agents.models import Agent
from runs.models import Run
from agents_site.errors import InvalidRequest
from agents_site.pagination import decode_cursor, encode_cursor, keyset_page, page_limit
from agents_site.vocabulary import EventKind, LedgerKind, RunStatus
from billing.models import LedgerEntry
from sessions import services as session_services
from sessions.models import Event, Session
from targets.models import Target

pytestmark = pytest.mark.django_db

SEEDED = 7
PAGE = 3


def _hex() -> str:
    return uuid.uuid4().hex


@dataclass
class ListSpec:
    """One list of the API: how to address it, where its rows are, how to add a row at time `at`."""

    name: str
    url: Callable[[dict], str]
    key: str
    add: Callable[[object, dict, object], str]  # (org handle, state, at) -> the new row's wire id
    maximum: int
    setup: Callable[[object, dict], None] = lambda org, state: None
    age: timedelta = timedelta(hours=1)  # how old the seeded rows are (a queued run is recovered after a while)


def _agent(org, state, at) -> str:
    with org.context():
        key = _hex()  # name (the list's tie-break) and id sort alike
        return Agent.objects.create(id=f"agent_{key}", name=f"a{key}", model="m", created_at=at, updated_at=at).id


def _owner(org, state) -> None:
    with org.context():
        state["agent"] = Agent.objects.create(id=f"agent_{_hex()}", name="owner", model="m", created_at=timezone.now(), updated_at=timezone.now())


def _run(status):
    def add(org, state, at) -> str:
        with org.context():
            agent = state.get("agent") or Agent.objects.get(name="owner")
            finished = at if status in RunStatus.FINISHED else None
            return Run.objects.create(
                id=f"run_{_hex()}", agent=agent, agent_name=agent.name, status=status, model="m", created_at=at, finished_at=finished
            ).id

    return add


def _session(org, state, at) -> str:
    with org.context():
        session = session_services.session_create(agent="bulk", actor="t")
        Session.objects.filter(pk=session.id).update(created_at=at)
        return session.id


def _log(org, state) -> None:
    with org.context():
        state["session"] = session_services.session_create(agent="log", actor="t").id


def _event(org, state, at) -> str:
    with org.context():
        event = session_services.session_append_event(session_id=state["session"], kind=EventKind.LOG, payload={"n": 1}, actor="t")
        Event.objects.filter(pk=event.id).update(created_at=at)
        return event.id


def _target(org, state, at) -> str:
    with org.context():
        return Target.objects.create(id=f"target_{_hex()}", label="box", created_at=at, updated_at=at).id


def _ledger(org, state, at) -> int:
    entry = LedgerEntry.objects.create(org=org.org, kind=LedgerKind.CREDIT, amount_cents=1)
    LedgerEntry.objects.filter(pk=entry.pk).update(created_at=at)
    return entry.pk


LISTS = [
    ListSpec("agents", lambda s: "/v1/agents", "agents", _agent, 500),
    ListSpec("org runs", lambda s: "/v1/agents/runs", "runs", _run(RunStatus.OK), 200, _owner),
    ListSpec("org runs failed", lambda s: "/v1/agents/runs?status=error", "runs", _run(RunStatus.ERROR), 200, _owner),
    ListSpec("org runs queued", lambda s: "/v1/agents/runs?status=queued", "runs", _run(RunStatus.QUEUED), 200, _owner, timedelta(seconds=5)),
    ListSpec("agent runs", lambda s: "/v1/agents/owner/runs", "runs", _run(RunStatus.OK), 200, _owner),
    ListSpec("sessions", lambda s: "/v1/agents/sessions", "sessions", _session, 500),
    ListSpec("events", lambda s: f"/v1/agents/sessions/{s['session']}/events", "events", _event, 500, _log),
    ListSpec("targets", lambda s: "/v1/agents/targets", "targets", _target, 500),
    ListSpec("ledger", lambda s: "/v1/agents/billing", "ledger", _ledger, 200),
]


def _request(org, url: str, params: dict):
    """GET `url` with `params` added to the query it already has (the test client would drop it)."""
    path, _, query = url.partition("?")
    return org.client.get(path, {**dict(parse_qsl(query)), **params})


def _get(org, url: str, **params):
    response = _request(org, url, params)
    assert response.status_code == 200, response.content
    return response.json()


def _walk(org, url: str, key: str, *, limit: int, during: Callable[[int], None] = lambda page: None) -> list:
    """Follow nextCursor from the first page to the last; call `during(page_number)` after each page."""
    seen, cursor, pages = [], None, 0
    while True:
        body = _get(org, url, limit=limit, **({"cursor": cursor} if cursor else {}))
        assert len(body[key]) <= limit
        seen += [row["id"] for row in body[key]]
        pages += 1
        during(pages)
        cursor = body.get("nextCursor")
        if cursor is None:
            assert "nextCursor" not in body  # absent, not null, on the last page
            return seen
        assert pages < 100, "the walk does not end"


@pytest.mark.parametrize("spec", LISTS, ids=lambda s: s.name)
def test_every_list_walks_to_its_end_with_equal_timestamps(org_a, spec):
    state: dict = {}
    spec.setup(org_a, state)
    at = timezone.now() - spec.age
    seeded = [spec.add(org_a, state, at) for _ in range(SEEDED)]

    walked = _walk(org_a, spec.url(state), spec.key, limit=PAGE)
    whole = [row["id"] for row in _get(org_a, spec.url(state), limit=spec.maximum)[spec.key]]

    assert sorted(walked, key=str) == sorted(seeded, key=str)  # every row once: none skipped, none repeated
    assert walked == whole  # in the list's own order
    if spec.key != "events":  # equal timestamps: the primary key decides, the same way on every page
        assert walked in (sorted(seeded, key=str), sorted(seeded, key=str, reverse=True), sorted(seeded), sorted(seeded, reverse=True))


@pytest.mark.parametrize("spec", LISTS, ids=lambda s: s.name)
def test_a_row_inserted_during_a_walk_never_duplicates_or_hides_an_older_row(org_a, spec):
    state: dict = {}
    spec.setup(org_a, state)
    at = timezone.now() - spec.age
    seeded = [spec.add(org_a, state, at) for _ in range(SEEDED)]
    inserted: list = []

    def insert(page: int) -> None:
        if page <= 2:  # a newer row and a row with the very same timestamp, mid-walk
            inserted.append(spec.add(org_a, state, timezone.now()))
            inserted.append(spec.add(org_a, state, at))

    walked = _walk(org_a, spec.url(state), spec.key, limit=PAGE, during=insert)
    whole = [row["id"] for row in _get(org_a, spec.url(state), limit=spec.maximum)[spec.key]]

    assert len(walked) == len(set(walked))
    assert set(seeded) <= set(walked)
    assert set(walked) <= set(seeded) | set(inserted)
    assert walked == [row for row in whole if row in set(walked)]


@pytest.mark.parametrize("spec", LISTS, ids=lambda s: s.name)
@pytest.mark.parametrize("limit", ["0", "-1", "AAA", "1.5", "", "true"])
def test_a_limit_below_1_or_not_an_integer_is_400(org_a, spec, limit):
    state: dict = {}
    spec.setup(org_a, state)
    spec.add(org_a, state, timezone.now())
    response = _request(org_a, spec.url(state), {"limit": limit})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["status"] == 400 and body["code"] == "invalid_request" and "limit" in body["error"]


@pytest.mark.parametrize("spec", LISTS, ids=lambda s: s.name)
def test_a_limit_above_the_maximum_is_clamped_to_it(org_a, spec):
    state: dict = {}
    spec.setup(org_a, state)
    at = timezone.now() - spec.age
    for _ in range(2):
        spec.add(org_a, state, at)
    body = _get(org_a, spec.url(state), limit=10**9)
    assert len(body[spec.key]) == 2 and "nextCursor" not in body


@pytest.mark.parametrize("spec", LISTS, ids=lambda s: s.name)
@pytest.mark.parametrize(
    "cursor",
    [
        "AAA",
        "!!!not-base64!!!",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b'{"l":"elsewhere","k":["2026-01-01T00:00:00+00:00","x"]}').decode(),
        base64.urlsafe_b64encode(b"[1,2]").decode(),
        "x" * 2000,
    ],
    ids=["short", "not-base64", "not-json", "another-list", "not-an-object", "too-long"],
)
def test_a_malformed_or_foreign_cursor_is_400(org_a, spec, cursor):
    state: dict = {}
    spec.setup(org_a, state)
    response = _request(org_a, spec.url(state), {"cursor": cursor})
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"


def test_a_cursor_of_one_list_is_refused_by_another(org_a):
    _owner(org_a, state := {})
    at = timezone.now()
    for _ in range(3):
        _run(RunStatus.OK)(org_a, state, at)
        _target(org_a, state, at)
    cursor = _get(org_a, "/v1/agents/targets", limit=1)["nextCursor"]
    response = org_a.client.get("/v1/agents/runs", {"cursor": cursor})
    assert response.status_code == 400 and "cursor" in response.json()["error"]


def test_a_cursor_whose_keys_have_the_wrong_type_is_400(org_a):
    for keys in (["yesterday", "run_x"], ["2026-01-01T00:00:00", "run_x"], ["2026-01-01T00:00:00+00:00"], [None, "run_x"]):
        cursor = base64.urlsafe_b64encode(json.dumps({"l": "runs.finished", "k": keys}).encode()).decode().rstrip("=")
        response = org_a.client.get("/v1/agents/runs", {"cursor": cursor})
        assert response.status_code == 400, keys


def test_the_agent_detail_still_shows_its_20_newest_runs(org_a):
    _owner(org_a, state := {})
    start = timezone.now() - timedelta(hours=1)
    ids = [_run(RunStatus.OK)(org_a, state, start + timedelta(seconds=i)) for i in range(25)]
    body = _get(org_a, "/v1/agents/owner")
    assert [r["id"] for r in body["recentRuns"]] == ids[::-1][:20]


def test_the_session_detail_keeps_its_50_newest_events_and_the_events_route_reads_them_all(org_a):
    _log(org_a, state := {})
    ids = [_event(org_a, state, timezone.now()) for _ in range(60)]
    detail = _get(org_a, f"/v1/agents/sessions/{state['session']}")
    assert [e["id"] for e in detail["recentEvents"]] == ids[10:]
    assert _walk(org_a, f"/v1/agents/sessions/{state['session']}/events", "events", limit=25) == ids


def test_another_orgs_session_events_are_404(org_a, org_b):
    _log(org_a, state := {})
    _event(org_a, state, timezone.now())
    response = org_b.client.get(f"/v1/agents/sessions/{state['session']}/events")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


# The helper itself.


def test_page_limit_defaults_clamps_and_refuses():
    assert page_limit(None, default=50, maximum=200) == 50
    assert page_limit(7, default=50, maximum=200) == 7
    assert page_limit(10**9, default=50, maximum=200) == 200
    for bad in (0, -1, "AAA", "3", 1.0, True):
        with pytest.raises(InvalidRequest):
            page_limit(bad, default=50, maximum=200)


def test_a_cursor_round_trips_and_carries_its_list():
    cursor = encode_cursor(tag="runs", keys=["2026-12-01T02:47:47.123456+00:00", "run_1"], scope="s1")
    assert "=" not in cursor and "+" not in cursor and "/" not in cursor
    assert decode_cursor(cursor, tag="runs", size=2, scope="s1") == ["2026-12-01T02:47:47.123456+00:00", "run_1"]
    with pytest.raises(InvalidRequest):
        decode_cursor(cursor, tag="sessions", size=2, scope="s1")
    with pytest.raises(InvalidRequest):
        decode_cursor(cursor, tag="runs", size=1, scope="s1")
    with pytest.raises(InvalidRequest):  # another list's (or org's) scope
        decode_cursor(cursor, tag="runs", size=2, scope="s2")


def test_a_cursor_is_signed_under_the_servers_key(settings):
    cursor = encode_cursor(tag="runs", keys=["2026-12-01T02:47:47.123456+00:00", "run_1"], scope="s")
    body, mac = cursor.split(".")
    edited = base64.urlsafe_b64encode(json.dumps({"l": "runs", "k": ["2030-01-01T00:00:00+00:00", "run_1"]}).encode()).decode().rstrip("=")
    for bad in (edited + "." + mac, body, body + ".", body + "." + mac[:-1] + ("A" if mac[-1] != "A" else "B")):
        with pytest.raises(InvalidRequest):
            decode_cursor(bad, tag="runs", size=2, scope="s")
    settings.SECRET_KEY = "another-deployment-" + "k" * 40
    with pytest.raises(InvalidRequest):
        decode_cursor(cursor, tag="runs", size=2, scope="s")


def _runs_cursor(org, state) -> str:
    at = timezone.now()
    for _ in range(3):
        _run(RunStatus.OK)(org, state, at)
    return _get(org, "/v1/agents/runs", limit=1)["nextCursor"]


def test_an_org_wide_runs_cursor_is_refused_on_an_agents_runs(org_a):
    _owner(org_a, state := {})
    cursor = _runs_cursor(org_a, state)
    assert org_a.client.get("/v1/agents/runs", {"cursor": cursor, "limit": 1}).status_code == 200
    response = org_a.client.get("/v1/agents/owner/runs", {"cursor": cursor, "limit": 1})
    assert response.status_code == 400, response.content
    assert response.json() == {"status": 400, "code": "invalid_request", "error": response.json()["error"]} and "cursor" in response.json()["error"]
    agent_cursor = _get(org_a, "/v1/agents/owner/runs", limit=1)["nextCursor"]
    assert org_a.client.get("/v1/agents/runs", {"cursor": agent_cursor}).status_code == 400


def test_another_orgs_cursor_and_an_edited_cursor_are_400(org_a, org_b):
    _owner(org_a, state := {})
    cursor = _runs_cursor(org_a, state)
    _owner(org_b, other := {})
    _runs_cursor(org_b, other)
    response = org_b.client.get("/v1/agents/runs", {"cursor": cursor})
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    body, mac = cursor.split(".")
    keys = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    keys["k"][0] = "2099-01-01T00:00:00+00:00"
    edited = base64.urlsafe_b64encode(json.dumps(keys, separators=(",", ":")).encode()).decode().rstrip("=") + "." + mac
    assert org_a.client.get("/v1/agents/runs", {"cursor": edited}).status_code == 400


def test_a_last_page_that_is_exactly_full_has_no_next_cursor(org_a):
    _owner(org_a, state := {})
    at = timezone.now()
    for _ in range(6):
        _run(RunStatus.OK)(org_a, state, at)
    with org_a.context():
        first = keyset_page(Run.objects.all(), order=("-finished_at", "-id"), limit=3, cursor=None, tag="t")
        second = keyset_page(Run.objects.all(), order=("-finished_at", "-id"), limit=3, cursor=first.next_cursor, tag="t")
    assert len(first.items) == 3 and first.next_cursor
    assert len(second.items) == 3 and second.next_cursor is None


def test_a_list_page_reads_the_store_in_one_query(org_a, django_assert_max_num_queries):
    from django.db import connections

    from tenancy import stores

    _owner(org_a, state := {})
    at = timezone.now()
    for _ in range(5):
        _run(RunStatus.OK)(org_a, state, at)
    cursor = _get(org_a, "/v1/agents/runs", limit=2)["nextCursor"]
    with django_assert_max_num_queries(1, connection=connections[stores.open_store(org_a.slug)]):
        body = _get(org_a, "/v1/agents/runs", limit=2, cursor=cursor)
    assert len(body["runs"]) == 2


def test_a_first_page_that_holds_the_whole_list_compiles_no_cursor_scope(org_a, monkeypatch):
    # The scope is the filters' SQL, compiled apart from the query (an eighth of the CPU of a
    # GET /v1/agents); only a page that reads or writes a cursor needs it.
    from agents_site import pagination

    real, calls = pagination.list_scope, []
    monkeypatch.setattr(pagination, "list_scope", lambda queryset: calls.append(queryset) or real(queryset))
    ids = {_agent(org_a, {}, timezone.now()) for _ in range(3)}
    assert {a["id"] for a in _get(org_a, "/v1/agents", limit=5)["agents"]} == ids and calls == []
    first = _get(org_a, "/v1/agents", limit=2)
    assert len(first["agents"]) == 2 and first["nextCursor"] and len(calls) == 1
    second = _get(org_a, "/v1/agents", limit=2, cursor=first["nextCursor"])
    assert "nextCursor" not in second and len(calls) == 2
    assert {a["id"] for a in first["agents"] + second["agents"]} == ids
