"""Errors answered around the API (resolver 404, Ninja 405) still carry the one error shape."""

import json

import pytest

from agents.models import Agent


def _error(response, status, code):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["status"] == status and body["code"] == code and isinstance(body["error"], str)
    return body


@pytest.mark.parametrize("path", ["/v1/agents/a/b/c", "/v1/nothing", "/v1/agents/"])
def test_unknown_route_under_v1_is_404_in_the_error_shape(org_a, path):
    _error(org_a.client.get(path), 404, "not_found")


def test_unknown_route_without_credentials_is_still_json(client, db):
    _error(client.get("/v1/agents/x/y"), 404, "not_found")


def test_wrong_method_is_405_in_the_error_shape_and_writes_nothing(org_a):
    response = org_a.client.put("/v1/agents", json.dumps({"name": "put"}), content_type="application/json")
    body = _error(response, 405, "method_not_allowed")
    assert body["error"] == "PUT is not allowed on /v1/agents"
    assert set(response["Allow"].replace(" ", "").split(",")) == {"GET", "POST"}
    with org_a.context():
        assert not Agent.objects.exists()


def test_pages_outside_the_api_are_left_alone(client, db):
    response = client.get("/no-such-page")
    assert response.status_code == 404 and not response["Content-Type"].startswith("application/json")


def _asgi(app, path: str, key: str, *, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
    """Serve one request through the ASGI application in this process; return (status, body)."""
    import asyncio

    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())]
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http", "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    sent: list[dict] = []

    async def receive():
        if not getattr(receive, "done", False):
            receive.done = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.fixture
def hops(monkeypatch):
    """The functions every `sync_to_async` call of the test ran in a thread, in order."""
    from asgiref.sync import SyncToAsync

    seen: list[str] = []
    real_call = SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        seen.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real_call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    return seen


def test_a_sync_view_request_crosses_into_a_thread_once(make_org, transactional_db, hops):
    """request_started, the middleware chain, the principal, the view and closing the answer:
    one thread hop for the whole request (server/asgi.py)."""
    from server.asgi import django_asgi_app

    org = make_org("hops")
    status, body = _asgi(django_asgi_app, "/v1/agents", org.key)
    assert status == 200 and json.loads(body)["agents"] == []
    assert hops == ["AgentsASGIHandler._serve_in_thread"], hops


def test_a_sync_write_crosses_once_and_is_stored(make_org, transactional_db, hops):
    from server.asgi import django_asgi_app
    from sessions.models import Event
    from sessions.services import session_create

    org = make_org("hopwrite")
    with org.context():
        session = session_create(agent="a", actor="t")
    status, body = _asgi(django_asgi_app, f"/v1/agents/sessions/{session.id}/events", org.key, method="POST",
                         body=b'{"kind": "log", "payload": {"n": 1}}')
    assert status == 201 and json.loads(body)["seq"] == 1
    assert hops == ["AgentsASGIHandler._serve_in_thread"], hops
    with org.context():
        assert list(Event.objects.filter(session_id=session.id).values_list("seq", flat=True)) == [1]


def test_request_signals_fire_once_in_the_thread_that_served_the_request(make_org, transactional_db):
    """Django's request_started / request_finished (which close the request's connections) run
    once each, in the request's own thread, not on the event loop."""
    import threading

    from django.core import signals

    from server.asgi import django_asgi_app

    org = make_org("signals")
    fired: list[tuple[str, int]] = []

    def started(**kwargs):
        fired.append(("started", threading.get_ident()))

    def finished(**kwargs):
        fired.append(("finished", threading.get_ident()))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        status, _ = _asgi(django_asgi_app, "/v1/agents", org.key)
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert status == 200
    assert [name for name, _ in fired] == ["started", "finished"], fired
    assert fired[0][1] == fired[1][1] != threading.get_ident()


def test_an_unknown_path_is_answered_by_the_sync_chain_in_the_error_shape(make_org, transactional_db, hops):
    from server.asgi import django_asgi_app

    org = make_org("nopath")
    status, body = _asgi(django_asgi_app, "/v1/agents/x/y/z", org.key)
    assert status == 404 and json.loads(body)["code"] == "not_found"
    assert hops == ["AgentsASGIHandler._serve_in_thread"], hops


def test_an_async_view_keeps_the_async_chain(make_org, transactional_db, hops):
    """The claim long-poll is an async view: it is not served by the one-crossing sync path,
    and its principal lookup is the async chain's own hop."""
    from server.asgi import django_asgi_app

    org = make_org("asyncview")
    status, body = _asgi(django_asgi_app, "/v1/agents/targets/tgt_missing/claim", org.key, method="POST")
    assert status in (403, 404), body  # no such target (or no claim key): refused, in the error shape
    assert {"status", "code", "error"} <= set(json.loads(body))
    assert "AgentsASGIHandler._serve_in_thread" not in hops and any("_resolve" in h for h in hops), hops
