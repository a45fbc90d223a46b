"""Agent writes hold together in the org's own store, not in `default`."""

import pytest
from django.db import transaction
from django.db.models.signals import pre_delete, pre_save

from agents.models import Agent
from runs.models import Run
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


def test_agent_input_errors_judges_every_field_on_its_own(org_a, settings):
    from agents.services import agent_input_errors

    settings.AGENTS_MAX_OUTPUT_TOKENS = 4096
    with org_a.context():
        errors = agent_input_errors(data=AgentInput(name="", timezone="Mars/Olympus", temperature=5, top_p=0, max_tokens=10**6))
        assert errors == {
            "name": "name is required",
            "timezone": errors["timezone"],
            "temperature": "temperature must be a number from 0 to 2",
            "top_p": "topP must be a number above 0 and at most 1",
            "max_tokens": "maxTokens must be an integer from 1 to 4096 (this deployment's cap)",
        }
        with pytest.raises(Exception) as first:  # the service stops at the first of them, in the same words
            agent_create(data=AgentInput(name="", timezone="Mars/Olympus"))
        assert first.value.message == errors["name"]
        assert agent_input_errors(data=AgentInput(name="fine", temperature=0.5)) == {}
        assert not Agent.objects.exists()  # reads only


def test_agent_input_errors_of_an_edit_does_not_judge_the_name(org_a):
    from agents.services import agent_input_errors

    with org_a.context():
        agent_create(data=AgentInput(name="kept"))
        assert agent_input_errors(data=AgentInput(model="", schedule="61 * * * *", execution_mode=ExecutionMode.LONG_RUNNING), agent_name="kept") == {
            "model": "model cannot be empty",
            "schedule": agent_input_errors(data=AgentInput(name="x", schedule="61 * * * *", execution_mode=ExecutionMode.LONG_RUNNING))["schedule"],
        }
