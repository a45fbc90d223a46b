"""Fixtures of the run machinery's tests: the agents tests' own (fast retry waits, funded orgs,
agents made through the API), since every run here is a run of an agent made through the API."""

from tests.agents.conftest import fast_policy, funded, scheduled_agent  # noqa: F401  (fixtures, autouse included)
