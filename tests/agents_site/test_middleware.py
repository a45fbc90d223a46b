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
