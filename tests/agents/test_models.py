"""Model invariants of agents."""

from agents.models import Agent


def test_agent_clean_does_not_borrow_another_models_rules():
    # Agent once carried McpServer.clean by mistake and raised AttributeError on full_clean.
    assert Agent(name="a").clean() is None
