"""The server spells no vocabulary word as a literal (issue 27 item 5, "one vocabulary everywhere").

Read from the source, so a literal added later fails here naming file and line:

* chat roles: a `"role"` key given, or a role compared with, `"system"`/`"user"`/`"assistant"`/`"tool"`
  is `ChatRole.*` instead;
* identity WebSocket frames: a frame's `"type"` given or compared is `WsFrameType.*`;
* webhook delivery statuses: a delivery's `status` given or compared is `DeliveryStatus.*`.

The runner spells its words as literals on purpose (it imports nothing of the server) and is
tied to the vocabulary by tests/runner/test_vocabulary_words.py; migrations are history.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agents_site.vocabulary import ChatRole, DeliveryStatus, WsFrameType

ROOT = Path(__file__).resolve().parents[2]
SERVER = ("agents", "agents_site", "server", "billing", "chat", "coding", "console", "guide", "identity", "openai_api", "runs", "sessions", "targets",
          "tenancy", "webhooks")
ROLES = frozenset(ChatRole.values)


def _sources() -> list[Path]:
    return sorted(p for package in SERVER for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts)


def _literal(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _literals(node) -> list[str]:
    """The string constants `node` is: one, or each of a tuple/list/set display."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [w for e in node.elts if (w := _literal(e)) is not None]
    word = _literal(node)
    return [] if word is None else [word]


def _names(node, field: str) -> bool:
    """Whether `node` reads `field`: `field`, `x.field`, `x["field"]`, `x.get("field")`."""
    if isinstance(node, ast.Name):
        return node.id == field
    if isinstance(node, ast.Attribute):
        return node.attr == field
    if isinstance(node, ast.Subscript):
        return _literal(node.slice) == field
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return _literal(node.args[0]) == field
    return False


def _spelled(tree, field: str, words: frozenset[str]) -> list[tuple[int, str]]:
    """Every line where `field` is given or compared with one of `words` as a literal."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None and _literal(key) == field:
                    found += [(node.lineno, w) for w in _literals(value) if w in words]
        elif isinstance(node, ast.Call):
            found += [(node.lineno, w) for k in node.keywords if k.arg == field for w in _literals(k.value) if w in words]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names(side, field) for side in sides):
                found += [(node.lineno, w) for side in sides for w in _literals(side) if w in words]
        elif isinstance(node, ast.Assign) and any(_names(t, field) for t in node.targets):
            value = node.value.body if isinstance(node.value, ast.IfExp) else node.value
            others = [node.value.orelse] if isinstance(node.value, ast.IfExp) else []
            found += [(node.lineno, w) for v in (value, *others) for w in _literals(v) if w in words]
        elif isinstance(node, ast.FunctionDef) and field in node.name:
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.IfExp):
                    found += [(ret.lineno, w) for v in (ret.value.body, ret.value.orelse) for w in _literals(v) if w in words]
    return found


def _offenders(field: str, words: frozenset[str], paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        tree = ast.parse(path.read_text())
        out += [f"{path.relative_to(ROOT)}:{line}: {field} {word!r}" for line, word in _spelled(tree, field, words)]
    return sorted(set(out))


def test_chat_roles_are_spelled_by_chat_role():
    assert _offenders("role", ROLES, _sources()) == []


def test_identity_websocket_frames_are_spelled_by_ws_frame_type():
    assert _offenders("type", frozenset(WsFrameType.values), [ROOT / "identity" / "consumers.py", ROOT / "identity" / "live.py"]) == []


def test_delivery_statuses_are_spelled_by_delivery_status():
    paths = [p for p in _sources() if p.parts[-2] in ("identity", "webhooks")]
    assert _offenders("status", frozenset(DeliveryStatus.values), paths) == []


def test_the_check_finds_what_it_looks_for():
    tree = ast.parse('m = {"role": "user"}\nif x.get("role") in ("tool", "assistant"): pass\nrole = "user" if a else "system"\n'
                     'def instructions_role(): return "user" if a else "system"\nsend(type="ack")\n')
    assert sorted(w for _, w in _spelled(tree, "role", ROLES)) == ["assistant", "system", "system", "tool", "user", "user", "user"]
