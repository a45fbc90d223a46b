"""The OpenAI Agents SDK (`openai-agents`), unchanged, against our Responses API on a real daphne:
`Runner.run` with a function tool and a handoff, pointed at our base URL through the SDK's
documented client setting (`set_default_openai_client`). The SDK needs `websockets<17` while the
dev requirements pin 17.4, so it is installed in a venv of its own (kept between runs in the temp
directory, as `bench/peers.py` does for LangGraph) and driven as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from agents_site.vocabulary import RunKind, RunStatus
from tests.responses_api.conftest import BASE_PATH, FEE_CENTS, debits, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True)]

#: What the SDK's venv gets, pinned (issue 56 item 3).
AGENTS_SDK_PINS = ("openai-agents==0.24.0",)
VENV = Path(tempfile.gettempdir()) / "agents-openai-agents-venv"

SCRIPT = textwrap.dedent('''
    """An Agents SDK program as its documentation writes it; only the client points at us."""
    import asyncio, json, os

    from openai import AsyncOpenAI
    from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

    set_tracing_disabled(True)  # traces would be exported to OpenAI: nothing leaves this machine
    set_default_openai_client(AsyncOpenAI(base_url=os.environ["BASE_URL"], api_key=os.environ["API_KEY"]))

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    specialist = Agent(name="specialist", model="writer", instructions="You answer weather questions in one line.")
    triage = Agent(name="triage", model="writer", instructions="Look the weather up, then hand off.",
                   tools=[get_weather], handoffs=[specialist])

    async def main():
        result = await Runner.run(triage, "What is the weather in Paris?")
        print(json.dumps({"final_output": result.final_output, "last_agent": result.last_agent.name,
                          "responses": [r.response_id for r in result.raw_responses]}))

    asyncio.run(main())
''')


def sdk_python() -> Path:
    """Return the SDK venv's python, creating the venv and installing the pins when absent."""
    python = VENV / "bin" / "python"
    marker = VENV / ".pins"
    if not python.exists() or not marker.exists() or marker.read_text() != " ".join(AGENTS_SDK_PINS):
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", *AGENTS_SDK_PINS], check=True, timeout=600)
        marker.write_text(" ".join(AGENTS_SDK_PINS))
    return python


def test_runner_run_with_a_function_tool_and_a_handoff(live, org, upstream, tmp_path):
    python = sdk_python()
    upstream.script(
        Reply(content=None, tool_calls=[("get_weather", {"city": "Paris"})]),  # triage calls the tool
        Reply(content=None, tool_calls=[("transfer_to_specialist", {})]),  # then hands off
        Reply(content="Paris: sunny all day."),  # the specialist answers
    )
    script = tmp_path / "agent_program.py"
    script.write_text(SCRIPT)
    # Run outside the clone: this project's own `agents` package must not shadow the SDK's.
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    env.update({"BASE_URL": live.url + BASE_PATH, "API_KEY": org.key})

    done = subprocess.run([str(python), str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["final_output"] == "Paris: sunny all day."
    assert result["last_agent"] == "specialist"
    runs = stored_runs(org)
    assert [(run.kind, run.status) for run in runs] == [(RunKind.RESPONSES, RunStatus.OK)] * 3
    assert result["responses"] == [run.id for run in runs]
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS] * 3
    first, second, third = upstream.chat_requests
    assert {t["function"]["name"] for t in first["tools"]} == {"get_weather", "transfer_to_specialist"}
    assert second["messages"][-1]["role"] == "tool" and second["messages"][-1]["content"] == "sunny in Paris"
    assert third["messages"][0]["content"].endswith("You answer weather questions in one line.")
