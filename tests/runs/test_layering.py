"""The run machinery never calls back into the apps that start runs (issue 27 item 2).

`runs` sits below `agents` (and chat, openai_api, coding, targets, …): none of its modules
imports them, not even inside a function; what differs by kind of run is the kind's `RunPolicy` (`runs.policies`), and what it needs of
them whatever the kind is registered in `runs.hooks`.
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
    """The inference check, completions and tool schemas come from agents, one typed registration each."""
    from agents.execution.completion import complete, complete_async
    from agents.inference import inference_configured

    assert hooks._inference_check == [inference_configured]
    assert hooks.completion() == (complete, complete_async)
    schema = hooks.tool_schema("calculator", agent_name="nobody", depth=0)
    assert schema["type"] == "object" and schema["properties"]


def test_what_differs_by_kind_is_no_registry_of_its_own():
    """Issue 48 item 2: a run kind is one `RunPolicy`; the per-behaviour registries and the string-keyed locator are gone."""
    gone = {"register_run_executor", "register_run_resumer", "register_resume_handler", "agent_code", "resume_dispatcher"}
    assert gone.isdisjoint(dir(hooks))
    root = RUNS.parent
    users = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                   if path.parts[len(root.parts)] not in {".venv", "tests"} and _mentions(path, gone) and gone & _names(path))
    assert users == []


def _mentions(path: Path, words: set[str]) -> bool:
    """True when the text of `path` holds one of `words` (only those modules are parsed)."""
    text = path.read_text()
    return any(word in text for word in words)


def _names(path: Path) -> set[str]:
    """The names module `path` uses or defines (identifiers, attributes, functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.add(node.name)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name)
    return found
