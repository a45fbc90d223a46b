"""The error envelope of the one NinjaAPI: every refused body answers `{status, code, error}`."""

import json

import pytest
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.http import Http404
from django.test import RequestFactory

from agents.models import Agent
from server.api import api

pytestmark = pytest.mark.both_stores


def _names(org):
    with org.context():
        return sorted(Agent.objects.values_list("name", flat=True))


def _error(response, status, code, message=None):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert set(body) >= {"status", "code", "error"}
    assert body["status"] == status and body["code"] == code
    if message is not None:
        assert body["error"] == message
    return body


@pytest.mark.parametrize("body", ["[1, 2]", '"writer"', "null", "42", "true"])
def test_body_that_is_not_a_json_object_is_400_and_writes_nothing(org_a, body):
    response = org_a.client.post("/v1/agents", body, content_type="application/json")
    _error(response, 400, "invalid_request", "the request body must be a JSON object")
    assert _names(org_a) == []


def test_patch_with_a_null_body_changes_nothing_and_is_400(org_a):
    org_a.client.post("/v1/agents", json.dumps({"name": "kept", "description": "d"}), content_type="application/json")
    with org_a.context():
        before = Agent.objects.get(name="kept").updated_at
    response = org_a.client.patch("/v1/agents/kept", "null", content_type="application/json")
    _error(response, 400, "invalid_request", "the request body must be a JSON object")
    with org_a.context():
        assert Agent.objects.get(name="kept").updated_at == before


def test_malformed_json_names_the_fault(org_a):
    _error(org_a.client.post("/v1/agents", "{bad", content_type="application/json"), 400, "invalid_request", "the request body is not valid JSON")
    assert _names(org_a) == []


def test_non_utf8_body_is_400(org_a):
    response = org_a.client.post("/v1/agents", b'{"name": "caf\xe9"}', content_type="application/json")
    _error(response, 400, "invalid_request", "the request body is not UTF-8")
    assert _names(org_a) == []


def test_unpaired_surrogate_escape_is_400_not_500(org_a):
    response = org_a.client.post("/v1/agents", '{"name": "sur", "description": "\\ud800"}', content_type="application/json")
    _error(response, 400, "invalid_request", "the request body holds an unpaired UTF-16 surrogate escape")
    assert _names(org_a) == []


def test_a_paired_surrogate_escape_is_an_ordinary_character(org_a):
    response = org_a.client.post("/v1/agents", '{"name": "emoji", "description": "\\ud83d\\ude00"}', content_type="application/json")
    assert response.status_code == 201 and response.json()["description"] == "\U0001f600"


def test_deeply_nested_body_is_400(org_a):
    response = org_a.client.post("/v1/agents", "[" * 100_000 + "]" * 100_000, content_type="application/json")
    _error(response, 400, "invalid_request", "the request body is not valid JSON")


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [(Http404(), 404, "not_found"), (PermissionDenied(), 403, "forbidden"), (SuspiciousOperation(), 400, "invalid_request")],
)
def test_django_exceptions_raised_in_a_view_keep_the_error_shape(db, exc, status, code):
    # Ninja's own defaults answer these as {"detail": ...} or a 500.
    request = RequestFactory().get("/v1/agents")
    _error(api.on_exception(request, exc), status, code)
