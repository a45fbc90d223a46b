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


def _asgi_get(app, path: str, key: str) -> tuple[int, bytes]:
    """Serve one GET through the ASGI application in this process; return (status, body)."""
    import asyncio

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
             "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    sent: list[dict] = []

    async def receive():
        if not sent and not getattr(receive, "done", False):
            receive.done = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_an_asgi_request_hops_to_a_thread_only_for_the_principal_and_its_sync_view(make_org, transactional_db, monkeypatch):
    """Every middleware runs on the event loop: besides Django's handler's own two (the
    request_started signal, closing the response) a request makes two thread hops."""
    from asgiref.sync import SyncToAsync

    from agents_site.asgi import django_asgi_app

    org = make_org("hops")
    hops: list[str] = []
    real_call = SyncToAsync.__call__

    async def counting(self, *args, **kwargs):
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await real_call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    status, body = _asgi_get(django_asgi_app, "/v1/agents", org.key)
    assert status == 200 and json.loads(body)["agents"] == []
    ours = [h for h in hops if "Signal" not in h and "close" not in h]
    assert len(hops) == len(ours) + 2, hops  # Django's handler: request_started, response.close
    assert len(ours) == 2 and "_resolve" in ours[0], hops  # the principal, then the sync view
