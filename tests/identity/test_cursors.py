"""The identity API's list cursors are signed and bound to the org and the list (issue 29, signed cursors).

The same mechanism as `/v1/agents` (`agents_site.pagination`): a cursor the server did not hand
out for this very list of this very org — an id guessed in the old plain-integer form, an
edited cursor, another org's, another list's — is 400 in the one error shape.
"""

from __future__ import annotations

import pytest

from tests.identity.conftest import create_agent, pair, post

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def _with_messages(org, count: int = 3) -> dict:
    """An identity agent of `org` related to its user, which sent the user `count` envelopes."""
    created = create_agent(org.client).json()
    post(org.client, f"/v1/identity/agents/{created['agent_id']}/relations")
    both = pair(org.client, org.user.get_username(), created)
    for _ in range(count):
        assert both.send_to_user().status_code == 201
    return created


def _refused(response) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["status"] == 400 and body["code"] == "invalid_request" and "cursor" in body["error"]


def test_a_page_hands_out_a_signed_cursor_and_the_next_page_follows_it(org_a):
    _with_messages(org_a, 3)
    first = org_a.client.get("/v1/identity/inbox?limit=2").json()
    assert first["next_cursor"] and "." in first["next_cursor"] and not first["next_cursor"].isdigit()
    second = org_a.client.get(f"/v1/identity/inbox?limit=2&cursor={first['next_cursor']}")
    assert second.status_code == 200 and len(second.json()["items"]) == 1 and second.json()["next_cursor"] is None


def test_a_cursor_the_list_did_not_hand_out_is_400(org_a, org_b):
    agent = _with_messages(org_a, 3)
    _with_messages(org_b, 3)
    inbox = org_a.client.get("/v1/identity/inbox?limit=1").json()["next_cursor"]
    foreign = org_b.client.get("/v1/identity/inbox?limit=1").json()["next_cursor"]
    conversation = f"/v1/identity/agents/{agent['agent_id']}/messages"
    conversation_cursor = org_a.client.get(f"{conversation}?limit=1").json()["next_cursor"]
    body, mac = inbox.split(".")
    edited = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + mac
    for cursor in ("3", "999999", foreign, edited, body, conversation_cursor, "x" * 2000):
        _refused(org_a.client.get(f"/v1/identity/inbox?cursor={cursor}"))
    # The inbox's cursor on the conversation list, and another org's on it.
    _refused(org_a.client.get(f"{conversation}?cursor={inbox}"))
    # The deliveries log of the agent (empty here) refuses any cursor it did not issue.
    _refused(org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/deliveries?cursor={inbox}"))
    # The cursor still works where it was issued.
    assert org_a.client.get(f"/v1/identity/inbox?cursor={inbox}").status_code == 200
    assert org_a.client.get(f"{conversation}?cursor={conversation_cursor}").status_code == 200


def test_the_document_declares_the_cursor_as_opaque(client):
    document = client.get("/v1/identity/openapi.json").json()
    cursors = [p for item in document["paths"].values() for op in item.values() if isinstance(op, dict)
               for p in op.get("parameters", []) if p.get("name") == "cursor"]
    assert len(cursors) == 3
    assert all("pattern" not in p["schema"] and p["schema"]["maxLength"] == 1024 for p in cursors)
