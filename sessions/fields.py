"""Field rules of sessions and events: limits and messages from reference §2.3.

Each `clean_*` returns the stored form of one field or raises `InvalidRequest` (400). Sizes
are in characters unless they say bytes.
"""

from __future__ import annotations

import json
import re

from django.apps import apps

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ControlCommand, EventKind, SessionStatus

MAX_ID = 128
MAX_AGENT = 128
MAX_ACTOR = 256
MAX_TITLE = 512
MAX_TASK_REF = 256
MAX_HOST = 256
MAX_CWD = 1024
MAX_REPO = 512
MAX_TARGET = 128
MAX_TERMINAL = 512
MAX_PROVIDER = 64
MAX_ACCOUNT = 256
MAX_PROJECT = 128
#: A project slug: it is a path segment of the public gallery (`/builds/{org}/{project}`), so no
#: `/`, no leading dot, no markup: a letter or digit, then letters, digits, `.`, `_`, `-`.
PROJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_PROJECT_RE = re.compile(PROJECT_PATTERN)
PROJECT_MESSAGE = "project must be a slug: a letter or digit, then letters, digits, '.', '_' or '-' (at most 128)"
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_MESSAGE_BYTES = 16 * 1024

STATUS_MESSAGE = "status must be " + "|".join(SessionStatus.values)
KIND_MESSAGE = "kind must be " + "|".join(EventKind.APPENDABLE)
# Looked up on every turn: a choices enum rebuilds its `.values` list on each access.
_STATUSES, _KINDS = frozenset(SessionStatus.values), frozenset(EventKind.values)
_COMMANDS = ControlCommand.STEERING  # approve/deny are recorded by their own routes, never appended as turns
PUBLISH_MESSAGE = "published requires a project — a build with no product is not a story anyone can open"


def _text(value) -> str:
    return "" if value is None else str(value)


def _storable(text: str, label: str) -> str:
    """Return `text` if UTF-8 can hold it; 400 for an unpaired surrogate (`"\\ud800"` parses as JSON)."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InvalidRequest(f"{label} must be valid UTF-8 text") from exc
    return text


def bounded(value, limit: int, label: str, *, trim: bool = True) -> str:
    """Return `value` (trimmed) if it was sent with at most `limit` characters, else 400 `"<label> too long"`.

    A value no UTF-8 store can hold is 400 `"<label> must be valid UTF-8 text"`.
    """
    text = _text(value)
    if len(text) > limit:  # as sent: the documented maxLength counts what the caller wrote, spaces included
        raise InvalidRequest(f"{label} too long")
    text = text.strip() if trim else text
    return _storable(text, label)


def clean_agent(value) -> str:
    """Return the agent label, trimmed; 400 when blank or over 128 characters."""
    agent = _text(value).strip()
    if not agent:
        raise InvalidRequest("agent is required")
    if len(agent) > MAX_AGENT:
        raise InvalidRequest("agent too long")
    return agent


def clean_title(value) -> str:
    """Return the title trimmed; the 512-character limit is checked before trimming."""
    text = _text(value)
    if len(text) > MAX_TITLE:
        raise InvalidRequest("title too long")
    return text.strip()


def clean_status(value) -> str:
    """Return a session status (`running|paused|done|error`); 400 for any other word."""
    status = _text(value).strip()
    if status not in _STATUSES:
        raise InvalidRequest(STATUS_MESSAGE)
    return status


def clean_kind(value) -> str:
    """Return an event kind (`message|tool-call|spawn|log|status|control`); else 400."""
    kind = _text(value).strip()
    if kind not in _KINDS:
        raise InvalidRequest(KIND_MESSAGE)
    return kind


def clean_task_ref(value) -> str:
    """Return a task workflow/run reference (≤256); else 400."""
    text = _text(value).strip()
    if len(text) > MAX_TASK_REF:
        raise InvalidRequest("task workflow/run reference too long")
    return text


# An https URL with a host name (letters, digits, dots, dashes), an optional port, then any
# path/query/fragment without blanks or control characters (named, not only `\S`: a schema
# fuzzer's `\S` admits the separators \x1c–\x1f, Python's does not). The OpenAPI document
# declares this very pattern.
TERMINAL_PATTERN = r"^https://[A-Za-z0-9][A-Za-z0-9.-]*(:[0-9]{1,5})?([/?#][^\x00-\x20\x7f\s]*)?$"
_TERMINAL_RE = re.compile(TERMINAL_PATTERN)


def clean_terminal(value) -> str:
    """Return a terminal URL: "" withdraws it, else `https://host…` of at most 512 characters.

    `javascript:`, `http:`, `file:`, protocol-relative `//host`, a URL without a host name and
    one with blanks inside are refused (400). Example: `" https://t.example.com/s/1 "` →
    `"https://t.example.com/s/1"`.
    """
    text = _text(value).strip()
    if not text:
        return ""
    if len(text) > MAX_TERMINAL:
        raise InvalidRequest("terminal url too long")
    if not _TERMINAL_RE.fullmatch(text):
        raise InvalidRequest("terminal url must be https")
    return text


def clean_project(value) -> str:
    """Return the project slug (≤128, `PROJECT_PATTERN`; "" for none), untrimmed; else 400."""
    text = bounded(value, MAX_PROJECT, "project", trim=False)
    if text and not _PROJECT_RE.fullmatch(text):
        raise InvalidRequest(PROJECT_MESSAGE, fields=[{"field": "project", "message": PROJECT_MESSAGE}])
    return text


def target_exists(target: str) -> bool:
    """Return True when run-target `target` is registered in the current org.

    The targets capability owns the `Target` model; until it is installed no target exists.
    """
    try:
        model = apps.get_model("targets", "Target")
    except LookupError:
        return False
    return model.objects.filter(pk=target).exists()


def clean_target(value) -> str:
    """Return a run-target id that exists in the org ("" detaches); else 400."""
    target = _text(value).strip()
    if not target:
        return ""
    if len(target) > MAX_TARGET:
        raise InvalidRequest("target too long")
    if not target_exists(target):
        raise InvalidRequest("target not found in this org")
    return target


CONTROL_PAYLOAD_MESSAGE = (
    "a control turn's payload is {command, message?, payload?} with command "
    + "|".join(c for c in ControlCommand.values if c in ControlCommand.STEERING) + " and message a string"
)


def check_control_payload(payload) -> None:
    """Refuse (400) a `control` turn whose payload is not a steering command.

    `control` turns are what `GET …/{id}/control` hands to a running executor, so each must be
    `{"command": "pause"|"resume"|"stop"|"message", "message"?: str, "payload"?: any}`.
    """
    command = payload.get("command") if isinstance(payload, dict) else None
    if not isinstance(command, str) or command not in _COMMANDS:  # a dict or list is no command (and unhashable)
        raise InvalidRequest(CONTROL_PAYLOAD_MESSAGE)
    if not isinstance(payload.get("message", ""), str):
        raise InvalidRequest(CONTROL_PAYLOAD_MESSAGE)


def dump_payload(payload) -> str:
    """Return `payload` as compact JSON text ("" for None), at most 64 KiB (bytes).

    Raises `InvalidRequest`: `"payload too large"` (over 65 536 bytes of compact UTF-8 JSON)
    or `"payload must be valid JSON"` (a value JSON cannot carry: NaN, a set, an object, an
    unpaired surrogate, nesting deeper than the JSON writer goes).
    """
    if payload is None:
        return ""
    try:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        size = len(text.encode())
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidRequest("payload must be valid JSON") from exc
    if size > MAX_PAYLOAD_BYTES:
        raise InvalidRequest("payload too large")
    return text


def clean_message(value) -> str | None:
    """Return a control message (≤16 KiB of UTF-8), None when absent; else 400."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("message must be a string")
    if len(_storable(value, "message").encode()) > MAX_MESSAGE_BYTES:
        raise InvalidRequest("message too long")
    return value
