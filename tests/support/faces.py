"""What the protocol faces' tests share (OpenAI-compatible, Responses, MCP, A2A): a live daphne's
environment on the loopback upstream, a funded org with an agent, and what was stored or billed."""

from __future__ import annotations

from agents_site.vocabulary import LedgerKind
from billing.models import LedgerEntry
from billing.services import credit_add
from runs.models import Run


def upstream_env(upstream_server, *, fee_cents: int = 100, **extra: str) -> dict:
    """Return a daphne's environment: inference is `upstream_server`, a run costs `fee_cents`, retries
    are immediate and pings every 5 s; `extra` adds or overrides variables."""
    return {
        "INFERENCE_BASE_URL": upstream_server.base_url,
        "INFERENCE_API_KEY": "test-key",
        "AGENTS_DEFAULT_MODEL": "test-model",
        "CLOUD_AGENT_FEE_CENTS": str(fee_cents),
        "AGENTS_RETRY_BASE_SECONDS": "0.001",
        "AGENTS_RETRY_MAX_SECONDS": "0.004",
        "AGENTS_SSE_PING_SECONDS": "5",
        **extra,
    }


def make_agent(org, name: str, **fields) -> dict:
    """Create an agent through POST /v1/agents; return its view."""
    response = org.client.post("/v1/agents", {"name": name, **fields}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def funded_org(make_org, prefix: str, **writer_fields):
    """Return a new org credited 1000 cents with agent `writer` ("Be brief." plus `writer_fields`)."""
    handle = make_org(prefix)
    credit_add(org=handle.org, cents=1000, actor="test")
    make_agent(handle, "writer", instructions="Be brief.", **writer_fields)
    return handle


def stored_runs(org) -> list[Run]:
    """Return every run row in the org's store, oldest first."""
    with org.context():
        return list(Run.objects.order_by("created_at", "id"))


def debits(org) -> list[LedgerEntry]:
    """Return the org's run debits, oldest first."""
    return list(LedgerEntry.objects.filter(org=org.org, kind=LedgerKind.AGENT).order_by("id"))
