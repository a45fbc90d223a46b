"""Agent writes hold together in the org's own store, not in `default`."""

import pytest
from django.db import transaction
from django.db.models.signals import pre_delete, pre_save

from agents.models import Agent, Run
from agents.services import AgentInput, agent_create, agent_delete, agent_update
from agents_site.vocabulary import ExecutionMode, RunStatus


@pytest.fixture
def write_log():
    """Record `(model, alias, in_atomic_block)` for every Agent/Run save and delete."""
    log = []

    def record(sender, instance, using, **kwargs):
        log.append((sender.__name__, using, transaction.get_connection(using).in_atomic_block))

    for signal in (pre_save, pre_delete):
        for model in (Agent, Run):
            signal.connect(record, sender=model, weak=False)
    yield log
    for signal in (pre_save, pre_delete):
        for model in (Agent, Run):
            signal.disconnect(record, sender=model)


def test_create_update_and_delete_run_in_a_transaction_on_the_org_store(org_a, write_log):
    # A bare transaction.atomic() opened on `default` and left the org store in autocommit: the
    # long-running cap's count-then-insert and delete's runs-then-agent did not hold together.
    with org_a.context() as alias:
        agent = agent_create(data=AgentInput(name="tx", execution_mode=ExecutionMode.LONG_RUNNING, schedule="* * * * *"))
        Run.objects.create(id="run_tx", agent=agent, agent_name="tx", status=RunStatus.OK, created_at=agent.created_at)
        write_log.clear()
        agent_update(ref="tx", data=AgentInput(description="d"))
        agent_delete(ref="tx")
        assert not Agent.objects.exists() and not Run.objects.exists()
    assert write_log and all(using == alias and atomic for _, using, atomic in write_log), write_log
    assert {name for name, _, _ in write_log} == {"Agent", "Run"}


def test_create_is_one_transaction_on_the_org_store(org_a, write_log):
    with org_a.context() as alias:
        agent_create(data=AgentInput(name="one"))
    assert write_log == [("Agent", alias, True)]
