"""agents.queries (issue 27 item 3): the agent lookup, on SQLite and PostgreSQL, reading back what the ORM would."""

from __future__ import annotations

import pytest
from django.db import router

from agents import queries
from agents.models import Agent
from tests.agents.conftest import make_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def test_agents_by_id_or_name_finds_by_either_and_reads_as_the_orm_does(org_a):
    view = make_agent(org_a, "writer", tools=["calculator"])
    with org_a.context():
        alias = router.db_for_read(Agent)
        by_name = queries.agents_by_id_or_name("writer", alias=alias)
        by_id = queries.agents_by_id_or_name(view["id"], alias=alias)
        assert by_name == by_id == [Agent.objects.get(name="writer")]
        stored = Agent.objects.get(name="writer")
        for field in Agent._meta.concrete_fields:  # dates are dates, JSON is JSON, on either store
            assert getattr(by_name[0], field.attname) == getattr(stored, field.attname), field.name
        assert queries.agents_by_id_or_name("nobody", alias=alias) == []
