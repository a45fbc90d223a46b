"""Wire helpers shared by every API: timestamps, optional fields, text no store can hold."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from agents_site.errors import InvalidRequest

# After `json.loads` a valid pair has become one code point, so any surrogate left is unpaired.
_UNPAIRED_SURROGATE = re.compile("[\ud800-\udfff]")
#: PostgreSQL text and jsonb cannot hold U+0000; SQLite could, but both stores refuse it alike.
NUL = "\x00"
#: How a NUL can appear in a JSON text: only escaped (raw control characters are invalid JSON).
NUL_ESCAPE = b"\\u0000"
#: How deep a JSON Schema (a tool's `parameters`) may nest: deeper ones are refused (400) before a
#: run starts, since encoding them for the gateway overflows the stack and fails the started run.
MAX_SCHEMA_DEPTH = 64
#: The range of an integer either store can compare with (a signed 64-bit column): a query or body
#: integer outside it is refused 400 before it reaches SQL (SQLite's driver raises OverflowError).
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def rfc3339(value: datetime | None) -> str:
    """Return `value` as RFC 3339 UTC to the second (`2026-11-30T09:04:11Z`), "" for None."""
    if value is None:
        return ""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact(view: dict, *, keep: tuple[str, ...] = ()) -> dict:
    """Drop keys whose value is None or "" (omitempty), except those named in `keep`."""
    return {k: v for k, v in view.items() if k in keep or (v is not None and v != "")}


# In JSON text an unpaired surrogate or a NUL can only arrive escaped (`\\udXXX`, `\\u0000`): raw UTF-8
# cannot encode either. A text without such an escape needs no walk (a walk of 20,000 strings is 0.3 s).
_RISKY_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")


def might_be_unstorable(json_text: str) -> bool:
    """Return whether the JSON text `json_text` holds an escape that may decode to an unstorable
    string (a surrogate or NUL escape); False means `unstorable_text` of its parse is None."""
    return _RISKY_ESCAPE.search(json_text) is not None


def json_object_body(raw: bytes) -> dict:
    """Return a request body (UTF-8 JSON text) as a dict; raise `InvalidRequest` (400) naming what is wrong.

    The one reading of a JSON body for both APIs (Ninja's parser in `server.api`, DRF's in
    `identity.parsers`): not UTF-8, not JSON (nesting past Python's stack included), not an
    object, or text PostgreSQL cannot hold (an unpaired surrogate, a NUL) → 400.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest("the request body is not UTF-8") from exc
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidRequest("the request body is not valid JSON") from exc
    if not isinstance(data, dict):
        raise InvalidRequest("the request body must be a JSON object")
    refusal = unstorable_text(data) if might_be_unstorable(text) else None
    if refusal is not None:
        raise refusal
    return data


def unstorable_text(data: object) -> InvalidRequest | None:
    """Return the 400 for the first string in `data` no store can hold, or None.

    Walks dicts (keys and values) and lists iteratively (a deeply nested body must not overflow
    the stack). A NUL (U+0000) names its field, e.g. for `{"payload": {"text": "a\\u0000"}}`:
    `error` "invalid request: payload.text: must not contain a NUL character (U+0000)" and
    `fields` `[{"field": "payload.text", "message": ...}]`. An unpaired surrogate escape is
    refused as a whole ("the request body holds an unpaired UTF-16 surrogate escape").
    """
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _UNPAIRED_SURROGATE.search(item):
                return InvalidRequest("the request body holds an unpaired UTF-16 surrogate escape")
            if NUL in item:
                field = path or "body"
                message = "must not contain a NUL character (U+0000)"
                return InvalidRequest(f"invalid request: {field}: {message}", fields=[{"field": field, "message": message}])
        elif isinstance(item, dict):
            for key, value in item.items():
                child = f"{path}.{key}" if path else str(key)
                stack.append((child, key))
                stack.append((child, value))
        elif isinstance(item, list):
            stack.extend((f"{path}.{i}" if path else str(i), value) for i, value in enumerate(item))
    return None


def json_depth(value: object, *, limit: int) -> int:
    """Return how deep `value` nests (a scalar 0, `{}` 1, `{"a": []}` 2), counting at most to `limit + 1`.

    Iterative (a value nested deeper than Python's stack is measured too) and stops as soon as
    `limit` is exceeded, so the answer is exact up to `limit` and `limit + 1` beyond it.
    """
    deepest = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest
