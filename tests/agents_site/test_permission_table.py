"""The permission table holds every route (issue 50 item 1): generated from the URL configuration.

Two orgs: org A (an admin, a plain member, objects the admin made) and org B (its admin is
"another org"), and a caller with no credential. Every route of the URL configuration (Ninja's
operations one by one, the identity API's methods, every page) is tried by every role:

- a route without a row fails `test_every_route_has_a_row` — a route added later (an MCP server,
  the Responses API) fails it until its row is written in `agents_site/permissions.py`;
- a refusal the table states is answered with exactly the status and body it says (403/404 in
  the error shape, the sign-in redirect, the 403 page), and nothing in org A's store changed;
- a role the table serves is never refused by the boundary (no 403 `forbidden` saying so, no
  sign-in redirect) and never gets a 500.

Path parameters name org A's real objects where there is one (agent, session, run, target), so
"another org" asks for objects that exist — in org A — and must get 404 like an unknown id.
Writes a served role sends name unknown objects, so the walk deletes and changes nothing.
"""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from agents_site import permissions
from agents_site.vocabulary import Access, Role
from tests.console.conftest import signed_in

pytestmark = pytest.mark.django_db

WALKED = (Role.ANONYMOUS, Role.MEMBER, Role.ADMIN, Role.OTHER_ORG)
UNKNOWN = "zz-unknown-9"
UNKNOWN_NUMBER = "987654"  # for `<int:…>` parameters
INT_PARAMS = {"key_id", "user_id", "invitation_id"}
UNKNOWN_RUN = "run_" + "9" * 32  # the shape `<runid:…>` admits


def _walk(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


def _ninja_methods() -> dict[str, set[str]]:
    from server.api import api

    methods: dict[str, set[str]] = {}
    for prefix, router in api._routers:
        for path, view in router.path_operations.items():
            route = "/v1" + ("/" + (prefix.strip("/") + "/" + path.strip("/")).strip("/")).rstrip("/")
            route = re.sub(r"\{(?:[^}:]+:)?([^}]+)\}", r"{\1}", route)
            for operation in view.operations:
                methods.setdefault(route, set()).update(operation.methods)
    return methods


def url_routes() -> list[tuple[str, tuple[str, ...]]]:
    """Return `(table path, methods)` of every route served: Ninja operations by method, DRF views by
    the methods they implement, other views as GET (and POST when the table lists it), WebSocket routes."""
    ninja = _ninja_methods()
    found: dict[str, set[str]] = {}
    for route, pattern in _walk(get_resolver().url_patterns):
        path = permissions.route_path(route)
        view_class = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
        if path in ninja:
            methods = ninja[path]
        elif view_class is not None and hasattr(view_class, "http_method_names") and view_class.__module__.startswith("identity"):
            methods = {m.upper() for m in view_class.http_method_names if m not in ("options", "head") and hasattr(view_class, m)}
        else:
            methods = {m for row in permissions.routes_of(path) for m in row.methods} or {"GET"}
        found.setdefault(path, set()).update(methods)
    from server import asgi

    for pattern in asgi.websocket_routes:
        found.setdefault(permissions.route_path(str(pattern.pattern)), set()).add("WEBSOCKET")
    for pattern in getattr(asgi, "http_routes", []):  # an ASGI app served beside Django's (none yet)
        found.setdefault(permissions.route_path(str(pattern.pattern)), set()).add("GET")
    return sorted((path, tuple(sorted(methods))) for path, methods in found.items())


def test_every_route_has_a_row():
    missing = [f"{method} {path}" for path, methods in url_routes() for method in methods
               if permissions.row_for(method, path) is None]
    assert missing == [], "routes without a row in agents_site/permissions.py: " + ", ".join(missing)


def test_every_row_names_a_route_and_every_role():
    served = {(method, path) for path, methods in url_routes() for method in methods}
    stale = [f"{m} {row.path}" for row in permissions.TABLE for m in row.methods
             if (m, row.path) not in served and row.path != permissions.DJANGO_ADMIN_PATH]
    assert stale == []
    for row in permissions.TABLE:
        assert set(row.access) == set(Role), row.path
        assert (row.rule != "") <= any(a == Access.OWN for a in row.access.values()) or row.rule == "", row.path


# --- the walk -------------------------------------------------------------------------------


@pytest.fixture
def world(org_a, org_b):
    """Org A with an admin, a member and objects; org B's admin; clients per role."""
    from agents.services import AgentInput, agent_create
    from sessions.services import session_create
    from targets.services import TargetInput, target_register
    from tenancy.services import api_key_create, membership_set

    membership = membership_set(org=org_a.org, username=f"member-{org_a.slug}", password="pw", is_admin=False)
    _, member_key = api_key_create(org=org_a.org, user=membership.user)
    with org_a.context():
        agent = agent_create(data=AgentInput(name="probe"))
        session = session_create(agent="probe", actor=f"{org_a.slug}/{org_a.user.username}")
        target, _ = target_register(owner=org_a.user.username, data=TargetInput(label="box", host="box-1"))
    member_handle = type(org_a)(org=org_a.org, slug=org_a.slug, user=membership.user, key=member_key, client=Client())
    return {
        "params": {"ref": agent.name, "id": session.id, "session_id": session.id, "target_id": target.id, "org": org_a.slug},
        "keys": {Role.MEMBER: member_key, Role.ADMIN: org_a.key, Role.OTHER_ORG: org_b.key},
        "handles": {Role.MEMBER: member_handle, Role.ADMIN: org_a, Role.OTHER_ORG: org_b},
        "org_a": org_a,
    }


def _url(path: str, params: dict, *, writes: bool) -> str:
    def fill(match):
        name = match.group(1)
        if writes or name not in params:
            if name == "run_id" and path.startswith("/v1/agents/runs/"):
                return UNKNOWN_RUN
            return UNKNOWN_NUMBER if name in INT_PARAMS and not path.startswith("/v1/") else UNKNOWN
        return params[name]

    return re.sub(r"\{([^}]+)\}", fill, path)


def _client(world, role: Role, path: str) -> Client:
    if role == Role.ANONYMOUS:
        return Client()
    if path.startswith("/v1/"):
        return Client(HTTP_AUTHORIZATION=f"Bearer {world['keys'][role]}")
    return signed_in(world["handles"][role])


def _store_counts(org) -> dict[str, int]:
    counts = {}
    with org.context():
        for model in apps.get_models():
            if model._meta.app_label in ("agents", "runs", "agent_sessions", "targets", "chat", "coding", "webhooks", "identity", "a2a_server"):
                counts[model._meta.label] = model.objects.count()
    return counts


def _walk_cases():
    cases = []
    for path, methods in url_routes():
        if path == permissions.DJANGO_ADMIN_PATH:
            continue
        for method in methods:
            if method == "WEBSOCKET":
                continue
            cases.append((method, path))
    return cases


def _request(client: Client, method: str, url: str):
    if method in ("POST", "PUT", "PATCH", "DELETE"):
        return getattr(client, method.lower())(url, data="{}", content_type="application/json")
    return client.get(url)


def _assert_refusal(response, row, role: Role, access: Access, path: str):
    if path.startswith("/v1/"):
        status = {Access.UNAUTHENTICATED: 401, Access.FORBIDDEN: 403, Access.NOT_FOUND: 404}[access]
        assert response.status_code == status, (role, path, response.status_code, response.content[:200])
        if path.startswith("/v1/agents/openai/v1/"):  # OpenAI's error object
            assert response.json()["error"]["code"] == ("invalid_api_key" if status == 401 else response.json()["error"]["code"])
            return
        body = response.json()
        if access == Access.FORBIDDEN:
            sentence = permissions.NO_PRINCIPAL if role == Role.ANONYMOUS else row.why
            code = "forbidden" if role == Role.ANONYMOUS else row.code
            assert body == {"status": 403, "code": code, "error": sentence}, (role, path, body)
        else:
            assert body["status"] == 404 and body["code"].endswith("not_found"), (role, path, body)
    elif access == Access.LOGIN:
        assert response.status_code == 302 and "/console/login/" in response["Location"], (role, path, response.status_code)
    else:
        assert response.status_code == {Access.FORBIDDEN: 403, Access.NOT_FOUND: 404}[access], (role, path, response.status_code)


@pytest.mark.parametrize("method, path", _walk_cases(), ids=lambda v: v)
def test_every_role_gets_what_the_table_says(world, method, path):
    row = permissions.row_for(method, path)
    assert row is not None
    for role in WALKED:
        access = row.access[role]
        served = access in (Access.ALLOW, Access.OWN)
        writes = method != "GET"
        if role == Role.OTHER_ORG and access == Access.NOT_FOUND:
            writes = False  # ask for org A's real objects: they must not be found
        if served and path.endswith("/stream"):
            continue  # an open stream never ends here; tests/sessions and tests/identity read them served
        url = _url(path, world["params"], writes=writes and served)
        before = None if served else _store_counts(world["org_a"])
        response = _request(_client(world, role, path), method, url)
        assert response.status_code < 500, (role, method, url, response.status_code, response.content[:300])
        if served:
            if path.startswith("/v1/") and response.status_code == 403 and response.get("Content-Type", "").startswith("application/json"):
                error = response.json().get("error", "")
                boundary = {permissions.NO_PRINCIPAL, "this route is not in the permission table"}
                if access == Access.ALLOW:  # an `own` route's check may say the row's sentence itself
                    boundary.add(row.why)
                assert error not in boundary, (role, method, url, error)
            if not path.startswith("/v1/") and path != "/console/logout/":  # signing out ends on the sign-in page
                assert not (response.status_code == 302 and "/console/login/" in response.get("Location", "")), (role, url)
        else:
            _assert_refusal(response, row, role, access, path)
            assert _store_counts(world["org_a"]) == before, (role, method, url)
