"""Fixtures of the OpenAI-compatible endpoint's tests: one real daphne for the package, the
official `openai` SDK pointed at it, funded orgs with agents, and what was stored or billed."""

from __future__ import annotations

import openai
import pytest

from runs.models import Run
from billing.models import LedgerEntry
from billing.services import credit_add
from agents_site.vocabulary import LedgerKind
from tests.support.live import LiveServer

OPENAI_FEE_CENTS = 7
BASE_PATH = "/v1/agents/openai/v1"


@pytest.fixture(scope="package")
def live(django_db_setup, django_db_blocker, upstream_server):
    """One daphne for every test here: inference is the loopback upstream, a call costs 7 cents."""
    server = LiveServer({
        "INFERENCE_BASE_URL": upstream_server.base_url,
        "INFERENCE_API_KEY": "test-key",
        "AGENTS_DEFAULT_MODEL": "test-model",
        "CLOUD_AGENT_FEE_CENTS": "100",
        "AGENTS_OPENAI_FEE_CENTS": str(OPENAI_FEE_CENTS),
        "AGENTS_RETRY_BASE_SECONDS": "0.001",
        "AGENTS_RETRY_MAX_SECONDS": "0.004",
        "AGENTS_SSE_PING_SECONDS": "5",
    }).start()
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
    handle = make_org("oai")
    credit_add(org=handle.org, cents=1000, actor="test")
    make_agent(handle, "writer", instructions="Be brief.")
    return handle


def make_agent(org, name: str, **fields) -> dict:
    """Create an agent through POST /v1/agents; return its view."""
    response = org.client.post("/v1/agents", {"name": name, **fields}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def stored_runs(org) -> list[Run]:
    """Return every run row in the org's store, oldest first."""
    with org.context():
        return list(Run.objects.order_by("created_at", "id"))


def debits(org) -> list[LedgerEntry]:
    """Return the org's run debits, oldest first."""
    return list(LedgerEntry.objects.filter(org=org.org, kind=LedgerKind.AGENT).order_by("id"))
