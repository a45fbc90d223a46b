"""Fixtures of the agents tests: fast retry waits, funded orgs, agents made through the API,
long-running agents defined at a chosen instant, PostgreSQL org stores."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import pytest

from runs.models import Run
from billing.models import LedgerEntry
from billing.services import credit_add
from agents_site.vocabulary import LedgerKind


@pytest.fixture(autouse=True)
def fast_policy(settings):
    """Keep the spec's retry policy but shrink its waits so the suite stays fast (and hash the
    fixtures' test passwords cheaply: PBKDF2 would dominate the suite's time)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AGENTS_RETRY_BASE_SECONDS = 0.001
    settings.AGENTS_RETRY_MAX_SECONDS = 0.004
    settings.AGENTS_FAILOVER_MODEL = ""
    settings.AGENTS_CONTROL_POLL_SECONDS = 0.05
    settings.CLOUD_AGENT_FEE_CENTS = 100
    settings.AGENTS_TOOL_HTTP_ALLOW = []
    settings.AGENTS_MCP_STDIO = False
    return settings


def fund(org, cents: int = 1000) -> None:
    """Credit `org` (an OrgHandle) with `cents`."""
    credit_add(org=org.org, cents=cents, actor="test")


def make_agent(org, name: str = "helper", **fields) -> dict:
    """Create an agent through POST /v1/agents; return its view (asserts 201)."""
    response = org.client.post("/v1/agents", {"name": name, **fields}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def run(org, ref: str, text: str = "hello", **headers):
    """POST /v1/agents/{ref}/run with `text` as input; return the response."""
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    return org.client.post(f"/v1/agents/{ref}/run", {"input": text}, content_type="application/json", **extra)


class StreamedRun:
    """A streamed run's answer read whole: `status_code`, `streaming`, `json()` — the final frame's
    data (the recorded run), or the JSON answered before any stream (a gateway's refusal: its 400)."""

    def __init__(self, response) -> None:
        self.status_code, self.streaming = response.status_code, response.streaming
        if not response.streaming:
            self.frames, self.body = [], response.json()
            return
        async def read() -> bytes:
            return b"".join([c if isinstance(c, bytes) else c.encode() async for c in response.streaming_content])

        self.frames = []
        for block in asyncio.run(read()).decode().split("\n\n"):
            lines = [line for line in block.split("\n") if line and not line.startswith(":")]
            if lines:
                event = next((line[7:] for line in lines if line.startswith("event: ")), None)
                self.frames.append((event, json.loads(next(line[6:] for line in lines if line.startswith("data: ")))))
        event, self.body = self.frames[-1]
        assert event == "run", self.frames

    def json(self) -> dict:
        return self.body


def run_streamed(org, ref: str, text: str = "hello") -> StreamedRun:
    """POST /v1/agents/{ref}/run with `stream: true`: the gateway is asked streamed (a call without
    `stream` is asked not streamed, decision 1534); return the answer read whole."""
    response = org.client.post(f"/v1/agents/{ref}/run", {"input": text, "stream": True}, content_type="application/json")
    return StreamedRun(response)


def debits(org) -> list[LedgerEntry]:
    """Return the org's run debits, oldest first."""
    return list(LedgerEntry.objects.filter(org=org.org, kind=LedgerKind.AGENT).order_by("id"))


def stored_runs(org) -> list[Run]:
    """Return every run row in the org's store, oldest first."""
    with org.context():
        return list(Run.objects.order_by("created_at", "id"))


@pytest.fixture
def funded(org_a):
    """`org_a` with 1000 cents of credit."""
    fund(org_a)
    return org_a


def utc(*args) -> datetime:
    """Return an aware UTC datetime: `utc(2026, 1, 10, 12, 35)`."""
    return datetime(*args, tzinfo=timezone.utc)


@pytest.fixture
def scheduled_agent():
    """Return a factory defining a long-running agent in `org` as if it was saved at `at`.

    `scheduled_agent(org, name="cron", schedule="*/5 * * * *", tz="UTC", at=utc(...)) -> Agent`
    (created through `agents.services.agent_create`, then its timestamps set to `at`).
    """
    from agents.models import Agent
    from agents.services import AgentInput, agent_create

    def factory(org, *, name: str = "cron", schedule: str = "*/5 * * * *", tz: str = "UTC", at: datetime, model: str | None = None):
        with org.context():
            agent = agent_create(
                data=AgentInput(name=name, execution_mode="long-running", schedule=schedule, timezone=tz, instructions="Report the time.", **({"model": model} if model else {}))
            )
            Agent.objects.filter(pk=agent.pk).update(created_at=at, updated_at=at)
            agent.refresh_from_db()
        return agent

    return factory


