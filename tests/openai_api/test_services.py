"""The prompt and the generation settings of one OpenAI-compatible call (no HTTP)."""

from agents.models import Agent
from openai_api.services import completion_agent, completion_prompt
from openai_api.wire import completion_request


def _agent(**fields) -> Agent:
    return Agent(id="agent_x", name="writer", instructions="Be brief.", max_tokens=100, temperature=0.5, top_p=None, **fields)


def test_the_prompt_is_the_agents_instructions_then_the_callers_messages_as_sent():
    request = completion_request({"model": "writer", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}], "extra": "dropped"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]})
    assert completion_prompt(_agent(), request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},  # "" not null: strict gateways
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
    assert request.input_text() == "hi"


def test_the_callers_generation_settings_override_the_agents_on_a_copy():
    agent = _agent()
    request = completion_request({"model": "writer", "messages": [{"role": "user", "content": "hi"}],
                                  "max_tokens": 20, "max_completion_tokens": 30, "top_p": 0.9})
    effective = completion_agent(agent, request)
    assert (effective.max_tokens, effective.temperature, effective.top_p) == (30, 0.5, 0.9)
    assert (agent.max_tokens, agent.top_p) == (100, None)  # the stored agent is untouched
