"""Fixtures of the MCP server's tests: one real daphne for the package, the `mcp` SDK's own client
pointed at it with a bearer key, a funded org with an agent, and what was stored or billed."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx2
import pytest
from django.db import connections
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

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
    """A funded org (1000 cents) with agent `writer` (instructions "Be brief.", a description)."""
    return funded_org(make_org, "mcp", description="Writes short answers")


def endpoint(live) -> str:
    return f"{live.url}/v1/agents/mcp"


def run(coro):
    """Run one coroutine to its end (the SDK's client is async; the tests are not)."""
    return asyncio.run(coro)


@contextlib.asynccontextmanager
async def mcp_client(live, key: str, *, mode: str = "auto"):
    """Yield the SDK's `Client` connected to the server over streamable HTTP with `key` as its
    bearer credential (`mode`: "auto" negotiates, "legacy" forces the initialize handshake)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        async with Client(streamable_http_client(endpoint(live), http_client=http), read_timeout_seconds=60,
                          mode=mode) as client:
            yield client


async def until(condition, *, timeout: float = 30.0) -> None:
    """Wait (on the loop) until `condition()` is true; AssertionError after `timeout` seconds."""
    def check() -> bool:  # the store is read in a thread of its own (not on the loop), its connections closed after
        try:
            return bool(condition())
        finally:
            connections.close_all()

    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.02)
