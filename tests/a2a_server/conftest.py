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

from runs.models import Run
from tests.support.faces import debits, funded_org, make_agent, stored_runs, upstream_env  # noqa: F401 (the tests import them from here)
from tests.support.live import LiveServer

FEE_CENTS = 100


@pytest.fixture(scope="package")
def live(django_db_setup, django_db_blocker, upstream_server):
    """One daphne for every test here: inference is the loopback upstream; a run costs 100 cents."""
    server = LiveServer(upstream_env(upstream_server, fee_cents=FEE_CENTS)).start()
    yield server
    server.stop()


@pytest.fixture
def org(make_org, upstream):
    """A funded org (1000 cents) with agent `writer` (instructions "Be brief.", tool `calculator`)."""
    return funded_org(make_org, "a2a", description="Writes short answers", tools=["calculator"])


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


async def task_when(client, task_id: str, state: int, *, timeout: float = 30.0) -> a2a.Task:
    """Poll GetTask until task `task_id` is in `state`; return it (AssertionError after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while True:
        task = await client.get_task(a2a.GetTaskRequest(id=task_id))
        if task.status.state == state:
            return task
        assert time.monotonic() < deadline, f"task {task_id} never reached {a2a.TaskState.Name(state)}: {task.status}"
        await asyncio.sleep(0.02)
