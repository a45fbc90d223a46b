"""The demo gateway (`make demo`'s stand-in model and the tests' upstream): its rules, through the real `openai` SDK."""

from __future__ import annotations

import subprocess
import sys

import openai
import pytest

from demo_gateway.server import DEMO_MODEL, SLOW_WORD_SECONDS, Upstream, demo_reply
from tests.support.live import ROOT, free_port

CALCULATOR = {"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}


@pytest.fixture
def gateway():
    server = Upstream(demo=True).start()
    yield server
    server.stop()


def client(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="none", max_retries=0)


def test_the_demo_lists_only_the_demo_model(gateway):
    assert [m.id for m in client(gateway).models.list().data] == [DEMO_MODEL]


def test_a_message_is_echoed_with_usage(gateway):
    answer = client(gateway).chat.completions.create(model="demo", messages=[{"role": "user", "content": "hello there"}])
    assert answer.choices[0].message.content == "You said: hello there"
    assert answer.choices[0].finish_reason == "stop"
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (2, 4)


def test_a_streamed_echo_arrives_word_by_word_with_usage(gateway):
    stream = client(gateway).chat.completions.create(model="demo", messages=[{"role": "user", "content": "one two three"}],
                                                     stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert pieces == ["You ", "said: ", "one ", "two ", "three"]
    assert chunks[-1].usage.completion_tokens == 5


def test_the_tool_command_answers_a_tool_call_the_request_offers(gateway):
    answer = client(gateway).chat.completions.create(
        model="demo", tools=[CALCULATOR], messages=[{"role": "user", "content": '/tool calculator {"expression":"6*7"}'}])
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert [(c.function.name, c.function.arguments) for c in choice.message.tool_calls] == [("calculator", '{"expression": "6*7"}')]


def test_a_tool_result_is_reported_by_the_tools_name():
    body = {"messages": [{"role": "user", "content": "/tool calculator {}"},
                         {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function",
                                                                                 "function": {"name": "calculator", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "call_1", "content": "42"}]}
    assert demo_reply(body).content == "The tool calculator answered: 42"


def test_the_slow_command_echoes_its_text_one_word_at_a_time():
    reply = demo_reply({"messages": [{"role": "user", "content": "/slow one two three"}]})
    assert reply.content == "You said: one two three"
    assert reply.chunks == ["You ", "said: ", "one ", "two ", "three"]
    assert reply.chunk_delay == SLOW_WORD_SECONDS > 0


@pytest.mark.parametrize(("text", "tools", "expected"), [
    ('/tool calculator {"expression":"6*7"}', [], "The tool calculator is not offered to this agent (offered: none)."),
    ("/tool calculator [1]", [CALCULATOR], "The arguments of /tool calculator must be a JSON object"),
    ("/tool calculator {oops", [CALCULATOR], "The arguments of /tool calculator must be a JSON object"),
])
def test_a_tool_command_it_cannot_honour_is_answered_in_words(text, tools, expected):
    reply = demo_reply({"messages": [{"role": "user", "content": text}], "tools": tools})
    assert reply.tool_calls is None
    assert reply.content.startswith(expected)


def test_the_command_line_says_where_it_listens_and_stops_on_a_taken_port():
    port = free_port()
    first = subprocess.Popen([sys.executable, "-m", "demo_gateway", "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip().endswith(f"http://127.0.0.1:{port}/v1")
        second = subprocess.run([sys.executable, "-m", "demo_gateway", "--port", str(port)], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.terminate()
        assert first.wait(timeout=30) == 0
