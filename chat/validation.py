"""The rules of a conversation's input: messages, roles, sizes, titles, credentials.

Used by the chat round and by recording turns. Every refusal happens before anything is
stored or billed: 400 `invalid_request` for a malformed message, 422 `secret_in_transcript`
for a credential in any of the caller's texts.
"""

from __future__ import annotations

from agents_site.errors import InvalidRequest
from agents_site.wire import MAX_SCHEMA_DEPTH, json_depth
from agents_site.vocabulary import ChatRole
from sessions.services import refuse_secrets

MAX_CONTENT_BYTES = 128 * 1024
#: At most this many messages in one body (a chat round or a recorded conversation): refused (400)
#: before any scan or store work, so a body's work is bounded before it starts.
MAX_MESSAGES = 500
#: At most this many bytes of UTF-8 message content in one body, all messages together.
MAX_TOTAL_CONTENT_BYTES = 512 * 1024
MAX_TOOLS = 128  # the caller's own function definitions per round (as on the OpenAI-compatible endpoint)
TOO_MANY_MESSAGES = f"messages: at most {MAX_MESSAGES} messages in one request"
TOO_MANY_TOOLS = f"tools: at most {MAX_TOOLS} function definitions"
MAX_TITLE = 80
DEFAULT_TITLE = "New conversation"
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_ROLES = "|".join(ChatRole.values)


def clean_messages(messages, *, required: bool) -> list[dict]:
    """Return `messages` (MessageIn-like objects or dicts) as `[{"role", "content"}]`.

    Raises `InvalidRequest` (400): "messages required" (None or empty, when `required`);
    more than `MAX_MESSAGES` messages or `MAX_TOTAL_CONTENT_BYTES` of content together;
    "messages[i].role must be one of system|user|assistant|tool"; "messages[i].content is
    required"; "messages[i].content is over 128 KiB". Example: `[MessageIn(role="user",
    content="hi")]` → `[{"role": "user", "content": "hi"}]`.
    """
    if not messages:
        if required:
            raise InvalidRequest("messages required")
        return []
    if len(messages) > MAX_MESSAGES:
        raise InvalidRequest(TOO_MANY_MESSAGES)
    cleaned = []
    total = 0
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else getattr(message, "role", None)
        content = message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
        if role not in ChatRole.values:
            raise InvalidRequest(f"messages[{index}].role must be one of {_ROLES}")
        if not isinstance(content, str):
            raise InvalidRequest(f"messages[{index}].content is required (a string)")
        size = len(content.encode())
        if size > MAX_CONTENT_BYTES:
            raise InvalidRequest(f"messages[{index}].content is over 128 KiB")
        total += size
        if total > MAX_TOTAL_CONTENT_BYTES:
            raise InvalidRequest(f"messages: at most {MAX_TOTAL_CONTENT_BYTES // 1024} KiB of content in one request")
        cleaned.append({"role": role, "content": content})
    return cleaned


def check_tools(tools: list[dict] | None) -> None:
    """Raise `InvalidRequest` (400) when a tool's `parameters` nests deeper than `MAX_SCHEMA_DEPTH`
    ("tools[i].function.parameters nests deeper than 64 levels"): refused before the round starts,
    never a started run failing while its request is encoded. `tools` are OpenAI function definitions."""
    if tools is not None and len(tools) > MAX_TOOLS:
        raise InvalidRequest(TOO_MANY_TOOLS)
    for index, tool in enumerate(tools or []):
        parameters = (tool.get("function") or {}).get("parameters")
        if json_depth(parameters, limit=MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
            raise InvalidRequest(f"tools[{index}].function.parameters nests deeper than {MAX_SCHEMA_DEPTH} levels")


def check_system(system: str | None) -> str:
    """Return the caller's `system` text ("" for None); 400 when it is over 128 KiB."""
    if system is None:
        return ""
    if len(system.encode()) > MAX_CONTENT_BYTES:
        raise InvalidRequest("system is over 128 KiB")
    return system


def refuse_credentials(messages: list[dict], *extra: str, tools: list[dict] | None = None) -> None:
    """Raise 422 `SecretInTranscript` (masked findings) when any message, `extra` text or tool
    definition (`tools`: OpenAI function definitions, their descriptions and parameter schemas)
    carries a credential.

    Every message is scanned, not only the one stored: the model would receive them all, and
    the caller's tool definitions too.
    """
    for message in messages:
        refuse_secrets(message["content"])
    for text in extra:
        if text:
            refuse_secrets(text)
    if tools:
        refuse_secrets(tools)


def clean_title(title: str | None) -> str | None:
    """Return a given `title` with newlines as spaces, trimmed (None when absent or blank); 400 over 80 characters."""
    if title is None:
        return None
    if len(title) > MAX_TITLE:
        raise InvalidRequest(f"title must be at most {MAX_TITLE} characters")
    title = title.replace("\r", " ").replace("\n", " ").strip()
    return title or None


def title_from(messages: list[dict]) -> str:
    """Return a conversation title: the first user message, newlines as spaces, trimmed, cut to
    80 characters; "New conversation" when there is none. Example: "Plan\\na trip " → "Plan a trip"."""
    for message in messages:
        if message["role"] == ChatRole.USER:
            title = message["content"].replace("\r\n", " ").replace("\n", " ").replace("\r", " ").strip()[:MAX_TITLE].strip()
            if title:
                return title
    return DEFAULT_TITLE


def last_user_message(messages: list[dict]) -> str | None:
    """Return the content of the last `user` message with text, or None."""
    for message in reversed(messages):
        if message["role"] == ChatRole.USER and message["content"].strip():
            return message["content"]
    return None
