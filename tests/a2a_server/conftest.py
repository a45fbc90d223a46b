"""Fixtures of the A2A face's tests: one real daphne for the package, `a2a-sdk`'s own client
pointed at it, a funded org with an agent, and what was stored or billed."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as a2a

from billing.models import LedgerEntry
from billing.services import credit_add
from runs.models import Run
from tests.support.live import LiveServer

FEE_CENTS = 100


@pytest.fixture(scope="package")
def live(django_db_setup, django_db_blocker, upstream_server):
    """One daphne for every test here: inference is the loopback upstream; a run costs 100 cents."""
    server = LiveServer({
        "INFERENCE_BASE_URL": upstream_server.base_url,
        "INFERENCE_API_KEY": "test-key",
        "AGENTS_DEFAULT_MODEL": "test-model",
        "CLOUD_AGENT_FEE_CENTS": str(FEE_CENTS),
        "AGENTS_RETRY_BASE_SECONDS": "0.001",
        "AGENTS_RETRY_MAX_SECONDS": "0.004",
        "AGENTS_SSE_PING_SECONDS": "5",
    }).start()
    yield server
    server.stop()


@pytest.fixture
def org(make_org, upstream):
    """A funded org (1000 cents) with agent `writer` (instructions "Be brief.", tool `calculator`)."""
    handle = make_org("a2a")
    credit_add(org=handle.org, cents=1000, actor="test")
    make_agent(handle, "writer", instructions="Be brief.", description="Writes short answers", tools=["calculator"])
    return handle


def make_agent(org, name: str, **fields) -> dict:
    """Create an agent through POST /v1/agents; return its view."""
    response = org.client.post("/v1/agents", {"name": name, **fields}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def endpoint(live, name: str = "writer") -> str:
    return f"{live.url}/v1/agents/{name}/a2a"


def run(coro):
    """Run one coroutine to its end (the SDK's client is async; the tests are not)."""
    return asyncio.run(coro)


@contextlib.asynccontextmanager
async def sdk_client(live, key: str, name: str = "writer", *, streaming: bool = False):
    """Yield the SDK's client made from the card it resolved at the agent's well-known address,
    with `key` as its bearer credential."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        card = await A2ACardResolver(http, base_url=endpoint(live, name)).get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def user_message(text: str, *, context_id: str = "", task_id: str = "", message_id: str = "m-1") -> a2a.Message:
    return a2a.Message(message_id=message_id, role=a2a.Role.ROLE_USER, parts=[a2a.Part(text=text)], context_id=context_id,
                       task_id=task_id)


def stored_runs(org) -> list[Run]:
    with org.context():
        return list(Run.objects.order_by("created_at"))


def debits(org) -> list[LedgerEntry]:
    return list(LedgerEntry.objects.filter(org=org.org, amount_cents__lt=0).order_by("id"))


async def task_when(client, task_id: str, state: int, *, timeout: float = 30.0) -> a2a.Task:
    """Poll GetTask until task `task_id` is in `state`; return it (AssertionError after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while True:
        task = await client.get_task(a2a.GetTaskRequest(id=task_id))
        if task.status.state == state:
            return task
        assert time.monotonic() < deadline, f"task {task_id} never reached {a2a.TaskState.Name(state)}: {task.status}"
        await asyncio.sleep(0.02)
