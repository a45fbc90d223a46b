"""Fixtures of the OpenAI-compatible endpoint's tests: one real daphne for the package, the
official `openai` SDK pointed at it, funded orgs with agents, and what was stored or billed."""

from __future__ import annotations

import openai
import pytest

from tests.support.faces import debits, funded_org, make_agent, stored_runs, upstream_env  # noqa: F401 (the tests import them from here)
from tests.support.live import LiveServer

OPENAI_FEE_CENTS = 7
BASE_PATH = "/v1/agents/openai/v1"


@pytest.fixture(scope="package")
def live(django_db_setup, django_db_blocker, upstream_server):
    """One daphne for every test here: inference is the loopback upstream, a call costs 7 cents."""
    server = LiveServer(upstream_env(upstream_server, AGENTS_OPENAI_FEE_CENTS=str(OPENAI_FEE_CENTS))).start()
    yield server
    server.stop()


def sdk(live, key: str) -> openai.OpenAI:
    """Return the official SDK client of `key` against the endpoint (no retries: each call is one request)."""
    return openai.OpenAI(base_url=live.url + BASE_PATH, api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def client(live, org):
    """The SDK as `org`'s API key sees the endpoint."""
    return sdk(live, org.key)


@pytest.fixture
def org(make_org, upstream):
    """A funded org (1000 cents) with agent `writer` (instructions "Be brief.")."""
    return funded_org(make_org, "oai")
