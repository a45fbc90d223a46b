"""The agent SDKs' WebSocket frame types are the server's vocabulary (issue 27 item 5).

The SDKs are standalone packages (they import nothing of the server), so they spell the identity
WebSocket's frame types as literals. This test reads both SDKs' WebSocket clients and ties every
frame type they send or compare to `WsFrameType` in `agents_site/vocabulary.py`: a type the
server does not know fails here, naming file and line.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from agents_site.vocabulary import WsFrameType

ROOT = Path(__file__).resolve().parents[2]
PYTHON_WS = ROOT / "sdk" / "python" / "agents_identity" / "ws.py"
TYPESCRIPT_WS = ROOT / "sdk" / "typescript" / "src" / "ws.ts"


def _literals(node) -> list[str]:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _python_types() -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(PYTHON_WS.read_text())):
        if isinstance(node, ast.Dict):
            found += [(node.lineno, w) for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and k.value == "type" for w in _literals(v)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            reads_type = any((isinstance(s, ast.Name) and s.id == "kind") or
                             (isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute) and s.func.attr == "get"
                              and s.args and _literals(s.args[0]) == ["type"]) for s in sides)
            if reads_type:
                found += [(node.lineno, w) for s in sides for w in _literals(s)]
    return found


def _typescript_types() -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(TYPESCRIPT_WS.read_text().splitlines(), 1):
        found += [(number, w) for w in re.findall(r'\btype:\s*"([^"]+)"|\.type\s*===?\s*"([^"]+)"', line) for w in w if w]
    return found


def test_the_python_sdk_speaks_only_the_servers_frame_types():
    found = _python_types()
    assert {w for _, w in found} >= {"envelope", "ack", "message", "sent", "error", "security_alert"}
    assert [(line, w) for line, w in found if w not in WsFrameType.values] == []


def test_the_typescript_sdk_speaks_only_the_servers_frame_types():
    found = _typescript_types()
    assert {w for _, w in found} >= {"envelope", "ack", "message", "sent", "error", "security_alert"}
    assert [(line, w) for line, w in found if w not in WsFrameType.values] == []
