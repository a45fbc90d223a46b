"""Fixtures of the agents tests: long-running agents defined at a chosen instant."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest


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


@pytest.fixture
def postgres_orgs(settings, monkeypatch):
    """Switch org stores to PostgreSQL (127.0.0.1:5432) for one test; drop the databases after.

    Yields a list: append each org slug created so its database is dropped at teardown.
    """
    import psycopg
    from django.db import connections
    from psycopg import sql

    from tenancy import stores

    server = "postgres://postgres@127.0.0.1:5432/postgres"
    settings.AGENTS_ORG_DATABASE = "postgres"
    monkeypatch.setenv("DATABASE_URL", server)
    created: list[str] = []
    yield created
    for slug in created:
        for alias in list(connections):
            if alias.endswith(slug):
                connections[alias].close()
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stores.postgres_database_name(slug))))
