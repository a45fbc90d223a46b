"""The runner's words are the server's vocabulary (issue 27 item 5).

The runner imports nothing of the server (the import contract), so it spells the words it sends
— event kinds, chat roles, control verbs, session statuses, run statuses, finish reasons,
sandbox names — as literals. This test reads the runner's source and ties every such literal to
`agents_site/vocabulary.py`: a word the server does not know fails here, naming file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agents_site.vocabulary import ChatRole, ControlCommand, EventKind, FinishReason, MachineSandbox, RunKind, RunStatus, SessionStatus

ROOT = Path(__file__).resolve().parents[2]
RUNNER = sorted((ROOT / "runner").glob("*.py"))


def _literal(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _words(path: Path) -> list[tuple[str, str, int]]:
    """Return `(vocabulary, word, line)` for every literal the runner uses as a vocabulary word."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        # self.event("log", {...}) / event(kind, ...): the first argument is an event kind.
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "event" and node.args:
            if (word := _literal(node.args[0])) is not None:
                found.append(("EventKind", word, node.lineno))
        # set_session_status(..., status="paused")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set_session_status":
            for keyword in node.keywords:
                if keyword.arg == "status" and (word := _literal(keyword.value)) is not None:
                    found.append(("SessionStatus", word, node.lineno))
        # {"role": "assistant", ...}
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if _literal(key) == "role" and (word := _literal(value)) is not None:
                    found.append(("ChatRole", word, node.lineno))
        # verb == "stop" / command.get("command") == "pause"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            left, right = node.left, node.comparators[0]
            named = (left.id if isinstance(left, ast.Name) else
                     _literal(left.args[0]) if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and left.func.attr == "get" and left.args else None)
            if named in ("verb", "command") and (word := _literal(right)) is not None:
                found.append(("ControlCommand", word, node.lineno))
            if named == "kind" and (word := _literal(right)) is not None:
                found.append(("EventKind", word, node.lineno))
        # Module constants named for what they hold: OK, ERROR, WAITING = "ok", "error", "waiting"; STOPPED = "stopped"; CODING_KIND = "coding".
        if isinstance(node, ast.Assign) and node.col_offset == 0:
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            names = [e.id for e in node.targets[0].elts] if isinstance(node.targets[0], ast.Tuple) else targets
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for name, value in zip(names, values):
                word = _literal(value)
                if word is None:
                    continue
                if name in ("OK", "ERROR", "WAITING"):
                    found.append(("RunStatus", word, node.lineno))
                elif name == "STOPPED":
                    found.append(("FinishReason", word, node.lineno))
                elif name.endswith("_KIND"):
                    found.append(("RunKind", word, node.lineno))
    return found


VOCABULARY = {
    "EventKind": set(EventKind.values),
    "SessionStatus": set(SessionStatus.values),
    "ChatRole": set(ChatRole.values) | {"tool"},  # "tool": OpenAI's role of a tool result, never stored as a turn's role
    "ControlCommand": set(ControlCommand.values),
    "RunStatus": set(RunStatus.values),
    "FinishReason": set(FinishReason.values),
    "RunKind": set(RunKind.values),
    "MachineSandbox": set(MachineSandbox.values),
}


def test_the_scan_reads_the_runner():
    kinds = {vocabulary for path in RUNNER for vocabulary, _, _ in _words(path)}
    assert {"EventKind", "ChatRole", "ControlCommand", "SessionStatus", "RunStatus"} <= kinds


def test_every_word_the_runner_spells_is_in_the_vocabulary():
    unknown = [f"{path.relative_to(ROOT)}:{line}: {word!r} is not a {vocabulary} word"
               for path in RUNNER for vocabulary, word, line in _words(path) if word not in VOCABULARY[vocabulary]]
    assert unknown == []


def test_the_sandbox_names_the_daemon_reports_are_machine_sandbox_words():
    from toolkit.sandbox import BubblewrapSandbox, UnconfinedCommands

    assert {BubblewrapSandbox().name, UnconfinedCommands().name, "unavailable"} <= VOCABULARY["MachineSandbox"]
