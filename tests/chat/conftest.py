"""Fixtures of the conversation tests: the agents tests' fast policy, helpers to post rounds and count rows."""

from __future__ import annotations

import pytest

from runs.models import Run
from billing.models import LedgerEntry
from agents_site.vocabulary import LedgerKind
from chat.models import Conversation, Message
from tests.agents.conftest import fast_policy, fund, make_agent  # noqa: F401  (fixture and helpers re-used)


def chat(org, body: dict, **extra):
    """POST /v1/agents/chat with `body` as JSON; return the response."""
    return org.client.post("/v1/agents/chat", body, content_type="application/json", **extra)


def user(text: str) -> list[dict]:
    """Return `[{"role": "user", "content": text}]`."""
    return [{"role": "user", "content": text}]


def stored(org) -> dict:
    """Return what the org's store holds: `{"conversations", "messages", "runs"}` (lists, oldest first)."""
    with org.context():
        return {
            "conversations": list(Conversation.objects.order_by("created_at", "id")),
            "messages": list(Message.objects.order_by("conversation_id", "position")),
            "runs": list(Run.objects.order_by("created_at", "id")),
        }


def charged(org) -> list[LedgerEntry]:
    """Return the org's run debits, oldest first."""
    return list(LedgerEntry.objects.filter(org=org.org, kind=LedgerKind.AGENT).order_by("id"))


@pytest.fixture
def funded(org_a):
    """`org_a` with 1000 cents of credit."""
    fund(org_a)
    return org_a


def wait_until(predicate, *, timeout: float = 10.0, what: str = "condition") -> None:
    """Wait until `predicate()` is true (polling a condition, not sleeping a guess); fail after `timeout` s."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
