"""The run machinery never calls back into the apps that start runs (issue 27 item 2).

`runs` sits below `agents` (and chat, openai_api, coding, targets, …): none of its modules
imports them, not even inside a function; what it needs of them is registered in `runs.hooks`.
`.importlinter` holds the same rule (`lint-imports`); this test keeps it without the tool.
"""

from __future__ import annotations

import ast
from pathlib import Path

import runs
from runs import hooks

FORBIDDEN = {"agents", "chat", "openai_api", "coding", "targets", "webhooks", "identity", "guide", "console"}
RUNS = Path(runs.__file__).parent


def _imported(path: Path) -> set[str]:
    """The top-level packages module `path` imports, at any depth (functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_no_module_of_runs_imports_an_app_above_it():
    modules = sorted(RUNS.rglob("*.py"))
    assert len(modules) > 15  # the app's modules are all here (a moved-away tree would pass vacuously)
    offending = {str(path.relative_to(RUNS)): sorted(_imported(path) & FORBIDDEN) for path in modules}
    assert {path: apps for path, apps in offending.items() if apps} == {}


def test_the_agents_app_registers_what_the_run_machinery_needs_of_it():
    """Executing, resuming, the inference check, completions and tool schemas come from agents."""
    from agents.execution.completion import complete, complete_async
    from agents.execution.queued import execute_queued
    from agents.execution.resume import run_resume
    from agents.inference import inference_configured

    assert hooks.agent_code("executor") is execute_queued
    assert hooks.agent_code("resumer") is run_resume
    assert hooks.agent_code("inference") is inference_configured
    assert (hooks.agent_code("complete"), hooks.agent_code("complete_async")) == (complete, complete_async)
    schema = hooks.agent_code("tool_schema")("calculator", agent_name="nobody", depth=0)
    assert schema["type"] == "object" and schema["properties"]
