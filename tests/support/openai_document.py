"""OpenAI's published OpenAPI document (`openai/openai-openapi` 2.3.0, MIT), as the conformance tests read it.

The whole document is 3.4 MB; `tests/support/reference/openai-openapi-2.3.0-chat.json` is the part
of it these tests use — the schemas reachable from `ROOTS`, unchanged — with its licence beside it.
`extract(full)` makes it; `python -m tests.support.openai_document <full document>` writes it again, and
tests/openai_api/test_conformance.py checks it against the full document where that is at hand
(`../shared/reference/openai-openapi-2.3.0.json` from the repository's parent directories, or
`OPENAI_OPENAPI_DOCUMENT`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXTRACT = HERE / "reference" / "openai-openapi-2.3.0-chat.json"
#: The schemas of the routes held: chat completions (request, answer, chunk), models, errors.
ROOTS = ("CreateChatCompletionRequest", "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse",
         "ListModelsResponse", "Model", "ErrorResponse")


def _refs(node, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _refs(item, found)


def extract(full: dict) -> dict:
    """Return `{"openapi", "info", "components": {"schemas": …}}`: the schemas reachable from ROOTS, as `full` has them."""
    schemas = full["components"]["schemas"]
    keep: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep.add(name)
        found: set[str] = set()
        _refs(schemas[name], found)
        todo.extend(found - keep)
    return {"openapi": full["openapi"], "info": full["info"], "components": {"schemas": {n: schemas[n] for n in sorted(keep)}}}


def full_document() -> Path | None:
    """Return the path of the whole document when it is at hand, else None."""
    given = os.environ.get("OPENAI_OPENAPI_DOCUMENT")
    if given:
        return Path(given)
    for parent in HERE.parents:
        candidate = parent / "shared" / "reference" / "openai-openapi-2.3.0.json"
        if candidate.exists():
            return candidate
    return None


def load() -> dict:
    """Return the committed extract (parsed)."""
    return json.loads(EXTRACT.read_text())


if __name__ == "__main__":
    EXTRACT.write_text(json.dumps(extract(json.loads(Path(sys.argv[1]).read_text())), indent=1, ensure_ascii=False) + "\n")
