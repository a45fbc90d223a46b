"""Bad schedules and time zones are refused with 400 and nothing is saved (issue 6, bad input)."""

from __future__ import annotations

import json

import pytest

from agents.models import Agent

pytestmark = pytest.mark.both_stores

BAD_SCHEDULES = [
    ("0 0 * * * *", "5-field cron"),  # six fields (seconds)
    ("@hourly", "5-field cron"),  # a macro
    ("61 * * * *", "invalid 'schedule'"),  # minute out of range
    ("0 0 30 2 *", "never fires"),  # parses, but no date matches
]


def _post(org, body: dict):
    return org.client.post("/v1/agents", data=json.dumps(body), content_type="application/json")


def _patch(org, ref: str, body: dict):
    return org.client.patch(f"/v1/agents/{ref}", data=json.dumps(body), content_type="application/json")


def _agent_count(org) -> int:
    with org.context():
        return Agent.objects.count()


@pytest.mark.parametrize(("schedule", "words"), BAD_SCHEDULES)
def test_create_with_bad_schedule_is_400_and_saves_nothing(org_a, schedule, words):
    response = _post(org_a, {"name": "cron", "executionMode": "long-running", "schedule": schedule})

    assert response.status_code == 400
    body = response.json()
    assert body["status"] == 400 and body["code"] == "invalid_request"
    assert words in body["error"]
    assert _agent_count(org_a) == 0


def test_create_with_unknown_timezone_is_400_and_saves_nothing(org_a):
    response = _post(org_a, {"name": "cron", "executionMode": "long-running", "schedule": "*/5 * * * *", "timezone": "Mars/Base"})

    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "invalid 'timezone': 'Mars/Base' is not an IANA time zone"}
    assert _agent_count(org_a) == 0


@pytest.mark.parametrize("tz", ["America", "Etc", "x" * 300])
def test_a_timezone_naming_a_directory_or_too_long_is_400_not_a_500(org_a, tz):
    response = _post(org_a, {"name": "cron", "executionMode": "long-running", "schedule": "*/5 * * * *", "timezone": tz})
    assert response.status_code == 400, response.content
    assert response.json() == {"status": 400, "code": "invalid_request", "error": f"invalid 'timezone': {tz!r} is not an IANA time zone"}
    assert _agent_count(org_a) == 0


@pytest.mark.parametrize(("schedule", "words"), BAD_SCHEDULES)
def test_patch_with_bad_schedule_is_400_and_changes_nothing(org_a, schedule, words):
    created = _post(org_a, {"name": "cron", "executionMode": "long-running", "schedule": "*/5 * * * *", "timezone": "Europe/Paris"})
    assert created.status_code == 201

    response = _patch(org_a, "cron", {"schedule": schedule})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request" and words in response.json()["error"]
    with org_a.context():
        agent = Agent.objects.get(name="cron")
    assert (agent.schedule, agent.timezone, agent.updated_at.isoformat()[:19]) == ("*/5 * * * *", "Europe/Paris", created.json()["updatedAt"][:19])


def test_patch_with_unknown_timezone_is_400_and_changes_nothing(org_a):
    assert _post(org_a, {"name": "cron", "executionMode": "long-running", "schedule": "0 9 * * 1"}).status_code == 201

    response = _patch(org_a, "cron", {"timezone": "Mars/Base", "schedule": "0 10 * * 1"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    with org_a.context():
        agent = Agent.objects.get(name="cron")
    assert (agent.schedule, agent.timezone) == ("0 9 * * 1", "UTC")


def test_valid_schedule_and_timezone_are_saved_with_next_run_in_utc(org_a):
    response = _post(org_a, {"name": "nightly", "executionMode": "long-running", "schedule": "0 0 * * *", "timezone": "America/Los_Angeles"})

    assert response.status_code == 201
    body = response.json()
    assert (body["schedule"], body["timezone"]) == ("0 0 * * *", "America/Los_Angeles")
    # Midnight in Los Angeles is 08:00Z (PST) or 07:00Z (PDT); never another hour.
    assert body["nextRunAt"].endswith(("T08:00:00Z", "T07:00:00Z"))
    with org_a.context():
        assert Agent.objects.filter(name="nightly", timezone="America/Los_Angeles").count() == 1
