"""The runner's words are the server's vocabulary (issue 27 item 5; issue 48 item 6: 0 literals).

The runner imports nothing of the server (the import contract), and neither does the shared core
(`toolkit`) both sides import. The words they send — event kinds, chat roles, control verbs,
session statuses, run statuses, finish reasons, run kinds, target kinds, sandbox names — are
spelled once, in the Django-free `toolkit.wire`, and `agents_site/vocabulary.py` builds its enums
of the same names from it. This test reads the source of `runner/` and `toolkit/` and counts the
vocabulary words still spelled as literals (0: each is a `toolkit.wire` member), naming file and
line; and it ties `toolkit.wire` to the server's vocabulary, member for member.

Counting rule (the forms the scan below reads): an event kind given to `event(…)` or `kind=`; a
session status given to `set_session_status(status=…)`; a chat role as a `"role"` value, a
`*role` keyword, default, class field or comparison; a control verb as a `"command"` value or
compared with `verb`/`command`; an event kind compared with `kind`; a target kind as `--kind`'s
default, a class field `kind` or the module constant `KINDS`; run statuses, a finish reason and a
run kind as the module constants `OK`/`ERROR`/`WAITING`, `STOPPED`, `*_KIND`. Each occurrence
counts once.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agents_site import vocabulary
from agents_site.vocabulary import (ChatRole, ControlCommand, EventKind, FinishReason, MachineSandbox, RunKind, RunStatus, SessionStatus,
                                    TargetKind)
from toolkit import wire

ROOT = Path(__file__).resolve().parents[2]
RUNNER = sorted((ROOT / "runner").glob("*.py"))
TOOLKIT = sorted((ROOT / "toolkit").rglob("*.py"))


def _literal(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _literals(node) -> list[str]:
    """The string constants `node` is: one, each of a tuple/list display, or both branches of `a if c else b`."""
    if isinstance(node, ast.Tuple | ast.List):
        return [w for e in node.elts for w in _literals(e)]
    if isinstance(node, ast.IfExp):
        return _literals(node.body) + _literals(node.orelse)
    word = _literal(node)
    return [] if word is None else [word]


def _role(name: str | None) -> bool:
    return bool(name) and name.lower().endswith("role")


def _words(path: Path) -> list[tuple[str, str, int]]:
    """Return `(vocabulary, word, line)` for every literal the file at `path` uses as a vocabulary word."""
    return _words_in(path.read_text())


def _words_in(source: str) -> list[tuple[str, str, int]]:
    """Return `(vocabulary, word, line)` for every literal `source` uses as a vocabulary word."""
    found = []
    tree = ast.parse(source)
    module_level = set(map(id, tree.body))
    class_level = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for n in c.body}
    for node in ast.walk(tree):
        # self.event("log", {...}) / event(kind, ...): the first argument is an event kind.
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "event" and node.args:
            if (word := _literal(node.args[0])) is not None:
                found.append(("EventKind", word, node.lineno))
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                # set_session_status(..., status="paused")
                if keyword.arg == "status" and isinstance(node.func, ast.Attribute) and node.func.attr == "set_session_status":
                    found += [("SessionStatus", word, node.lineno) for word in _literals(keyword.value)]
                # append_event(..., kind="tool-call")
                if keyword.arg == "kind":
                    found += [("EventKind", word, node.lineno) for word in _literals(keyword.value)]
                # RoutedRun(instructions_role="user" if ... else "system")
                if _role(keyword.arg):
                    found += [("ChatRole", word, node.lineno) for word in _literals(keyword.value)]
                # parser.add_argument("--kind", default="machine")
                if keyword.arg == "default" and node.args and _literal(node.args[0]) == "--kind":
                    found += [("TargetKind", word, node.lineno) for word in _literals(keyword.value)]
        # def opening_messages(..., instructions_role: str = "system")
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            defaults = list(zip(arguments.args[len(arguments.args) - len(arguments.defaults):], arguments.defaults))
            defaults += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
            found += [("ChatRole", word, node.lineno) for a, d in defaults if _role(a.arg) for word in _literals(d)]
        # {"role": "assistant", ...}; {"command": "stop", ...}
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if _literal(key) == "role" and (word := _literal(value)) is not None:
                    found.append(("ChatRole", word, node.lineno))
                if _literal(key) == "command" and (word := _literal(value)) is not None:
                    found.append(("ControlCommand", word, node.lineno))
        # verb == "stop" / command.get("command") == "pause" / body.get("instructionsRole") == "user"
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            left, right = node.left, node.comparators[0]
            named = (left.id if isinstance(left, ast.Name) else
                     _literal(left.args[0]) if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and left.func.attr == "get" and left.args else None)
            if named in ("verb", "command") and (word := _literal(right)) is not None:
                found.append(("ControlCommand", word, node.lineno))
            if named == "kind" and (word := _literal(right)) is not None:
                found.append(("EventKind", word, node.lineno))
            if _role(named) and (word := _literal(right)) is not None:
                found.append(("ChatRole", word, node.lineno))
        # Class fields named for what they hold: `instructions_role: str = "system"`, `kind: str = "machine"` (the target's kind).
        if isinstance(node, ast.AnnAssign) and id(node) in class_level | module_level and isinstance(node.target, ast.Name) and node.value is not None:
            if _role(node.target.id):
                found += [("ChatRole", word, node.lineno) for word in _literals(node.value)]
            elif node.target.id == "kind":
                found += [("TargetKind", word, node.lineno) for word in _literals(node.value)]
        # Module constants named for what they hold: OK, ERROR, WAITING = "ok", "error", "waiting"; STOPPED = "stopped";
        # CODING_KIND = "coding"; KINDS = ("laptop", …) (the target kinds a machine may register as).
        if isinstance(node, ast.Assign) and id(node) in module_level:
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            names = [e.id for e in node.targets[0].elts] if isinstance(node.targets[0], ast.Tuple) else targets
            values = node.value.elts if isinstance(node.value, ast.Tuple) and len(names) > 1 else [node.value]
            for name, value in zip(names, values):
                if name == "KINDS":
                    found += [("TargetKind", word, node.lineno) for word in _literals(value)]
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
    "TargetKind": set(TargetKind.values),
}


#: Measured on main at ada07f5 by the rule above: 55 literal words in runner/ and toolkit/ (0 since: `toolkit.wire`).
MAX_LITERAL_WORDS = 0


def test_the_runner_and_the_shared_core_spell_no_vocabulary_word_as_a_literal():
    literals = [f"{path.relative_to(ROOT)}:{line}: {vocabulary} {word!r}" for path in RUNNER + TOOLKIT if path.name not in STANDALONE
                for vocabulary, word, line in _words(path)]
    assert len(literals) <= MAX_LITERAL_WORDS, literals


#: Files that spell their words themselves, each with why: `wire.py` is where the words are;
#: `verify_build.py` is the one-file verifier, served byte for byte and run from a clone of any
#: repository with nothing of the platform importable (tests/toolkit/test_imports.py).
STANDALONE = ("wire.py", "verify_build.py")


def test_the_standalone_verifier_spells_the_wire_words():
    from toolkit import verify_build

    assert (verify_build.COMMIT_KIND, verify_build.LOG_KIND) == (wire.EventKind.COMMIT, wire.EventKind.LOG)


def test_the_scan_reads_the_runner_and_the_shared_core():
    assert len(RUNNER) > 5 and {"toolloop.py", "stopping.py", "wire.py"} <= {path.name for path in TOOLKIT}
    # The words spelled through `toolkit.wire` are where the literals were: the tool loop's roles, a child's stop.
    toolloop, stopping = (ROOT / "toolkit" / "toolloop.py").read_text(), (ROOT / "toolkit" / "stopping.py").read_text()
    assert "ChatRole.ASSISTANT" in toolloop and "ChatRole.TOOL" in toolloop and "ControlCommand.STOP" in stopping


@pytest.mark.parametrize("name", ["RunStatus", "FinishReason", "RunKind", "ChatRole", "SessionStatus", "EventKind", "ControlCommand",
                                  "TargetKind", "MachineSandbox"])
def test_the_server_vocabulary_is_built_from_the_wire_words(name):
    server, shared = getattr(vocabulary, name), getattr(wire, name)
    assert [(m.name, m.value) for m in server] == [(m.name, m.value) for m in shared]
    assert all(type(m.value) is str for m in server)  # a plain word in migrations and the admin, not a wire member


def test_the_scan_finds_every_form_a_word_takes():
    """Each form the runner writes a word in is read (so a misspelt word in any of them would fail the test below)."""
    source = """
KINDS = ("laptop", "spaceship")
OK, ERROR, WAITING = "ok", "error", "waitng"
STOPPED = "halted"
CODING_KIND = "codin"

class Claim:
    instructions_role: str = "narrator"
    kind: str = "toaster"

def opening(*, instructions_role: str = "sistem"):
    parser.add_argument("--kind", default="boat")
    Claim(instructions_role="usr" if body.get("instructionsRole") == "uzer" else "system")
    self.event("tool_call", {"role": "bot"})
    server.append_event(kind="tool_cal", payload={})
    server.set_session_status(status="sleeping")
    child.set({"command": "halt"})
    if verb == "pauze" or command.get("command") == "resum" or event.get("kind") == "comit":
        pass
"""
    unknown = sorted((vocabulary, word) for vocabulary, word, _ in _words_in(source) if word not in VOCABULARY[vocabulary])
    assert unknown == sorted([
        ("TargetKind", "spaceship"), ("RunStatus", "waitng"), ("FinishReason", "halted"), ("RunKind", "codin"),
        ("ChatRole", "narrator"), ("TargetKind", "toaster"), ("ChatRole", "sistem"), ("TargetKind", "boat"), ("ChatRole", "usr"),
        ("ChatRole", "uzer"), ("EventKind", "tool_call"), ("ChatRole", "bot"), ("EventKind", "tool_cal"), ("SessionStatus", "sleeping"),
        ("ControlCommand", "halt"), ("ControlCommand", "pauze"), ("ControlCommand", "resum"), ("EventKind", "comit"),
    ])


def test_the_sandbox_names_the_daemon_reports_are_machine_sandbox_words():
    from toolkit.sandbox import BubblewrapSandbox, UnconfinedCommands

    assert {BubblewrapSandbox().name, UnconfinedCommands().name, "unavailable"} <= VOCABULARY["MachineSandbox"]
