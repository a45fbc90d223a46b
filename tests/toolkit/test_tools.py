"""The shared tools: built-ins, the machine's confined shell, and the result rules of a call."""

from __future__ import annotations

import json
import os

import pytest

from toolkit.builtin import async_tools
from toolkit.calculator import calculate
from toolkit.invoke import EMPTY, TRUNCATED, Tool, ToolError, invoke
from toolkit.shell import Shell


def test_http_get_exists_only_with_hosts_to_fetch():
    assert sorted(async_tools()) == ["calculator", "current_time"]
    assert sorted(async_tools(http_allow=("example.com",))) == ["calculator", "current_time", "http_get"]


@pytest.mark.parametrize(
    "command",
    ["cat /etc/passwd", "cat</etc/passwd", "cd .. && ls", "ls ~", "echo $(cat /etc/hostname)", "X=/etc ls", "cat ../secret"],
)
def test_the_shell_refuses_a_command_that_names_a_path_outside_its_root(tmp_path, command):
    (tmp_path.parent / "secret").write_text("s")
    with pytest.raises(ToolError, match="confined"):
        Shell(tmp_path).check(command)


async def test_the_shell_runs_inside_its_root_with_none_of_the_runners_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERENCE_API_KEY", "sk-machine-secret")
    monkeypatch.setenv("AGENTS_API_KEY", "ak_secret")
    shell = Shell(tmp_path)
    out = await shell({"command": f"pwd && env && echo hi > {tmp_path}/made.txt"})
    assert out.startswith("exit 0\n")
    assert str(tmp_path) in out
    assert "sk-machine-secret" not in out and "ak_secret" not in out
    assert (tmp_path / "made.txt").read_text() == "hi\n"


async def test_a_shell_command_over_its_time_is_killed(tmp_path):
    shell = Shell(tmp_path, timeout=0.3)
    with pytest.raises(ToolError, match="killed"):
        await shell({"command": "sleep 5; echo late > late.txt"})
    assert not (tmp_path / "late.txt").exists()


def test_the_calculator_does_arithmetic_and_nothing_else():
    assert calculate("(2 + 3) * 4 / sqrt(16)") == "5"
    for bad in ("__import__('os')", "open('x')", "2 ** 99999", "1/0", ""):
        with pytest.raises(ToolError):
            calculate(bad)


async def _echo(arguments: dict) -> str:
    return arguments.get("text", "")


async def test_invoke_follows_the_servers_result_rules():
    tool = Tool("echo", "", {}, _echo)
    assert await invoke(tool, name="echo", raw_arguments=json.dumps({"text": "hi"}), timeout=1) == ("hi", False)
    assert await invoke(tool, name="echo", raw_arguments="{}", timeout=1) == (EMPTY, False)
    long, failed = await invoke(tool, name="echo", raw_arguments=json.dumps({"text": "x" * 20000}), timeout=1)
    assert not failed and long.endswith(TRUNCATED) and len(long.encode()) == 16 * 1024 + len(TRUNCATED.encode())
    assert (await invoke(tool, name="echo", raw_arguments="[1]", timeout=1))[1] is True
    assert (await invoke(None, name="ghost", raw_arguments="{}", timeout=1)) == ("error: no tool named 'ghost' on this machine", True)
    too_big, failed = await invoke(tool, name="echo", raw_arguments=json.dumps({"text": "y" * 40000}), timeout=1)
    assert failed and too_big.startswith("error: the arguments")


async def test_a_tool_over_its_time_is_an_error_and_a_stop_passes_through_with_the_output(tmp_path):
    import asyncio

    from toolkit.sandbox import CommandCancelled

    slow = Shell(tmp_path).tool()
    result, failed = await invoke(slow, name="shell", raw_arguments=json.dumps({"command": "echo a; sleep 60"}), timeout=0.5)
    assert failed and result == "error: the tool ran longer than 0.5 s"
    task = asyncio.create_task(invoke(slow, name="shell", raw_arguments=json.dumps({"command": "echo partial; echo > seen; sleep 60"}), timeout=60))
    for _ in range(2000):
        if (tmp_path / "seen").exists():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(CommandCancelled) as caught:
        await task
    assert caught.value.result.output == "partial\n"
