"""The OpenAI chat completions wire format: the request read and checked, the answers shaped.

`completion_request(body)` turns a `POST …/chat/completions` JSON body into a
`CompletionRequest` or raises `InvalidParam` (400) naming the field; the `*_body` functions
build `chat.completion`, `chat.completion.chunk` and `model` objects from a recorded run or
agent. No I/O here.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field

from agents_site.vocabulary import ChatRole, FinishReason, OpenAIFinishReason
from agents_site.wire import MAX_SCHEMA_DEPTH, json_depth, unstorable_text
from openai_api.errors import InvalidParam

MAX_CONTENT_BYTES = 128 * 1024
MAX_MESSAGES = 1000
MAX_TOOLS = 128
MAX_MODEL_LENGTH = 128
FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


@dataclass
class CompletionRequest:
    """A checked chat completions request.

    `messages` are the caller's messages reduced to the keys a gateway reads (`role`,
    `content`, `name`, `tool_calls`, `tool_call_id`); `tools` OpenAI function definitions the
    caller executes itself; `max_tokens` (`max_completion_tokens` wins), `temperature`,
    `top_p` None when absent.
    """

    model: str
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    passthrough: dict = field(default_factory=dict)  # PASSTHROUGH fields sent, checked, for the gateway unchanged
    max_tokens_name: str = "max_tokens"  # what the caller called the output cap (`max_completion_tokens` or `max_tokens`)
    metadata: dict = field(default_factory=dict)  # the caller's `metadata`, recorded on the run

    def gateway_fields(self) -> dict[str, str]:
        """Return the fields the caller set that reach the gateway unchanged, `{name at the gateway:
        name the caller used}`: the PASSTHROUGH fields sent, and `max_tokens` (as the caller named
        it), `temperature`, `top_p` when set. A gateway refusing one of them is the caller's 400
        (`openai_api.errors.run_failure`); `messages` and `tools` are composed with the agent's own
        (its instructions, its tools, trimming) and are not among them."""
        fields = {name: name for name in self.passthrough}
        if self.max_tokens is not None:
            fields["max_tokens"] = self.max_tokens_name
        for name in ("temperature", "top_p"):
            if getattr(self, name) is not None:
                fields[name] = name
        return fields

    def texts(self, *roles: str) -> list[str]:
        """Return the text of every message of `roles` (text parts joined by newlines), in order."""
        return [message_text(m) for m in self.messages if m["role"] in roles]

    def input_text(self) -> str:
        """Return the run's recorded input: the last user message's text ("" without one)."""
        users = self.texts(ChatRole.USER)
        return users[-1] if users else ""


def message_text(message: dict) -> str:
    """Return a message's text: its string content, or its text parts joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _bool(body: dict, name: str, param: str | None = None) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidParam(f"'{name}' must be a boolean (true or false)", param=param or name)
    return value


def _number(body: dict, name: str, low: float, high: float, *, integer: bool = False):
    value = body.get(name)
    if value is None:
        return None
    if integer and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema's integer is a number with no fraction: `24.0` is 24 (OpenAI's document)
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not (low <= value <= high):
        what = "an integer" if integer else "a number"
        raise InvalidParam(f"'{name}' must be {what} from {low:g} to {high:g}", param=name)
    return value


def _content(message: dict, index: int) -> str | list | None:
    param = f"messages[{index}].content"
    content = message.get("content")
    role = message["role"]
    if content is None:
        if role == ChatRole.ASSISTANT and message.get("tool_calls"):
            return None
        raise InvalidParam(f"messages[{index}] needs a 'content'", param=param)
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise InvalidParam(f"messages[{index}].content: only text parts ({{\"type\": \"text\", \"text\": …}}) are supported",
                                   param=param)
        text = message_text(message)
    elif isinstance(content, str):
        text = content
    else:
        raise InvalidParam(f"messages[{index}].content must be a string or a list of text parts", param=param)
    if len(text.encode()) > MAX_CONTENT_BYTES:
        raise InvalidParam(f"messages[{index}].content is over {MAX_CONTENT_BYTES // 1024} KiB", param=param)
    return content


def _tool_calls(message: dict, index: int) -> list | None:
    calls = message.get("tool_calls")
    if calls is None:
        return None
    param = f"messages[{index}].tool_calls"
    if message["role"] != ChatRole.ASSISTANT or not isinstance(calls, list):
        raise InvalidParam(f"{param}: only an assistant message carries tool_calls, as a list", param=param)
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if (not isinstance(function, dict) or not isinstance(call.get("id"), str)
                or not isinstance(function.get("name"), str) or not isinstance(function.get("arguments", ""), str)):
            raise InvalidParam(f"{param}: each call is {{id, type: 'function', function: {{name, arguments}}}}", param=param)
    # Only what a gateway reads goes on: any other key (however deep) is dropped here.
    return [{"id": call["id"], "type": "function",
             "function": {"name": call["function"]["name"], "arguments": call["function"].get("arguments", "")}} for call in calls]


def _messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidParam("'messages' must be a non-empty list of messages", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise InvalidParam(f"at most {MAX_MESSAGES} messages", param="messages")
    cleaned = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidParam(f"messages[{index}] must be an object", param=f"messages[{index}]")
        role = message.get("role")
        if role not in tuple(ChatRole):
            roles = ", ".join(ChatRole)
            raise InvalidParam(f"messages[{index}].role must be one of: {roles}", param=f"messages[{index}].role")
        _content(message, index)
        calls = _tool_calls(message, index)
        if role == ChatRole.TOOL and not isinstance(message.get("tool_call_id"), str):
            raise InvalidParam(f"messages[{index}]: a tool message needs its 'tool_call_id'", param=f"messages[{index}].tool_call_id")
        if "name" in message and not isinstance(message["name"], str):
            raise InvalidParam(f"messages[{index}].name must be a string", param=f"messages[{index}].name")
        kept = {key: message[key] for key in MESSAGE_KEYS if key in message}
        if calls is not None:
            kept["tool_calls"] = calls
            if kept.get("content") is None:  # what the OpenAI SDK sends; strict gateways (llama-cpp-python) refuse null
                kept["content"] = ""
        cleaned.append(kept)
    return cleaned


def _tools(body: dict) -> list[dict]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise InvalidParam(f"'tools' must be a list of at most {MAX_TOOLS} function definitions", param="tools")
    cleaned = []
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(function, dict):
            raise InvalidParam(f"{param} must be an OpenAI function definition: {{type: 'function', function: {{name, …}}}}",
                               param=param)
        name = function.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.match(name):
            raise InvalidParam(f"{param}.function.name must match ^[A-Za-z0-9_-]{{1,64}}$", param=f"{param}.function.name")
        if "description" in function and not isinstance(function["description"], str):
            raise InvalidParam(f"{param}.function.description must be a string", param=f"{param}.function.description")
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise InvalidParam(f"{param}.function.parameters must be a JSON Schema object", param=f"{param}.function.parameters")
        if json_depth(function.get("parameters"), limit=MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
            raise InvalidParam(f"{param}.function.parameters nests deeper than {MAX_SCHEMA_DEPTH} levels",
                               param=f"{param}.function.parameters")
        kept = {key: function[key] for key in ("name", "description", "parameters", "strict") if key in function}
        cleaned.append({"type": "function", "function": kept})
    return cleaned


#: Fields of the request this endpoint reads itself (`stream_options` is its own: never forwarded;
#: `metadata` is recorded on the run).
HANDLED = frozenset({"model", "messages", "tools", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                     "temperature", "top_p", "n", "metadata"})
#: Accepted, checked and not sent on (OpenAI's own services: a gateway has none of them, a strict one
#: refuses the field): `store` (every call is recorded as a run anyway), `service_tier`,
#: `prompt_cache_key`, `safety_identifier`. docs/guides/openai-compatible.md lists them.
ACCEPTED = {"store": "boolean", "service_tier": ("auto", "default", "flex", "scale", "priority"),
            "prompt_cache_key": "string", "safety_identifier": "string"}
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
MAX_SAFETY_IDENTIFIER = 64
MAX_PROMPT_CACHE_KEY = 1024
#: Fields passed to the gateway unchanged (after a check of their shape), on every completion of the call.
PASSTHROUGH = ("response_format", "tool_choice", "parallel_tool_calls", "stop", "seed", "presence_penalty",
               "frequency_penalty", "user")
#: Refused: the returned tokens would bypass the masking of credentials in the reply.
REFUSED = {"logprobs": "'logprobs' is not supported: token log-probabilities would bypass the masking of credentials in replies",
           "top_logprobs": "'top_logprobs' is not supported: token log-probabilities would bypass the masking of credentials in replies"}
MAX_STOP = 4
MAX_USER_LENGTH = 256
TOOL_CHOICE_WORDS = ("none", "auto", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")


def _passthrough(body: dict) -> dict:
    """Return the PASSTHROUGH fields `body` sets (null ones left out), each checked; 400 naming a bad one."""
    sent = {name: body[name] for name in PASSTHROUGH if body.get(name) is not None}
    fmt = sent.get("response_format")
    if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") not in RESPONSE_FORMATS):
        raise InvalidParam("'response_format' must be an object whose 'type' is text, json_object or json_schema", param="response_format")
    if fmt is not None and json_depth(fmt, limit=MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise InvalidParam(f"'response_format' nests deeper than {MAX_SCHEMA_DEPTH} levels", param="response_format")
    choice = sent.get("tool_choice")
    if choice is not None and choice not in TOOL_CHOICE_WORDS and not (
            isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("function"), dict)
            and isinstance(choice["function"].get("name"), str) and FUNCTION_NAME.match(choice["function"]["name"])):
        raise InvalidParam("'tool_choice' must be none, auto, required or {type: 'function', function: {name}}", param="tool_choice")
    if "parallel_tool_calls" in sent:
        _bool(sent, "parallel_tool_calls")
    stop = sent.get("stop")
    if stop is not None and not (isinstance(stop, str) or (isinstance(stop, list) and len(stop) <= MAX_STOP
                                                          and all(isinstance(s, str) for s in stop))):
        raise InvalidParam(f"'stop' must be a string or a list of at most {MAX_STOP} strings", param="stop")
    _number(sent, "seed", -(2**63), 2**63 - 1, integer=True)
    _number(sent, "presence_penalty", -2, 2)
    _number(sent, "frequency_penalty", -2, 2)
    user = sent.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > MAX_USER_LENGTH):
        raise InvalidParam(f"'user' must be a string of at most {MAX_USER_LENGTH} characters", param="user")
    return sent


def _unhandled(body: dict) -> None:
    """Refuse (400, naming it) a field this endpoint neither reads, passes on nor accepts: none is dropped in silence."""
    for name, message in REFUSED.items():
        if body.get(name) not in (None, False, 0):
            raise InvalidParam(message, param=name)
    for name in body:
        if name not in HANDLED and name not in PASSTHROUGH and name not in REFUSED and name not in ACCEPTED:
            raise InvalidParam(f"'{name}' is not supported by this endpoint", param=name)


def _accepted(body: dict) -> None:
    """Check the ACCEPTED fields' shapes as OpenAI's document states them (null is absent); 400 naming a bad one."""
    if body.get("store") is not None:
        _bool(body, "store")
    tier = body.get("service_tier")
    if tier is not None and tier not in ACCEPTED["service_tier"]:
        raise InvalidParam(f"'service_tier' must be one of: {', '.join(ACCEPTED['service_tier'])}", param="service_tier")
    for name, limit in (("prompt_cache_key", MAX_PROMPT_CACHE_KEY), ("safety_identifier", MAX_SAFETY_IDENTIFIER)):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise InvalidParam(f"'{name}' must be a string of at most {limit} characters", param=name)


def _metadata(body: dict) -> dict[str, str]:
    """Return the request's `metadata` (OpenAI's `Metadata`: at most 16 pairs, string keys of at most
    64 characters, string values of at most 512); {} when absent or null; 400 naming a bad one."""
    metadata = body.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA_PAIRS:
        raise InvalidParam(f"'metadata' must be an object of at most {MAX_METADATA_PAIRS} string pairs", param="metadata")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY:
            raise InvalidParam(f"metadata keys are at most {MAX_METADATA_KEY} characters", param=f"metadata.{key[:64]}")
        if not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            raise InvalidParam(f"metadata values are strings of at most {MAX_METADATA_VALUE} characters", param=f"metadata.{key}")
    return dict(metadata)


def completion_request(body) -> CompletionRequest:
    """Check a chat completions body; return the `CompletionRequest` or raise `InvalidParam` (400).

    Checked: `model` (a non-empty string), `messages` (non-empty; roles system, user,
    assistant, tool; text content ≤ 128 KiB each), `tools` (function definitions), `stream`
    and `stream_options.include_usage` (booleans), `max_tokens` / `max_completion_tokens`
    (1..1 000 000), `temperature` (0..2), `top_p` (0..1), `n` (1 only); PASSTHROUGH fields
    (`response_format`, `tool_choice`, `parallel_tool_calls`, `stop`, `seed`, the penalties,
    `user`) checked and kept for the gateway; `metadata` (≤ 16 string pairs, recorded on the run),
    `store`, `service_tier`, `prompt_cache_key`, `safety_identifier` checked and not sent on
    (ACCEPTED); `logprobs` / `top_logprobs` refused; any other field refused, naming it (issue 29
    item 7, issue 53).
    """
    if not isinstance(body, dict):
        raise InvalidParam("the request body must be a JSON object", param=None)
    _unhandled(body)
    _accepted(body)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InvalidParam("'model' is required: the name or id of one of your agents", param="model")
    if len(model) > MAX_MODEL_LENGTH:
        raise InvalidParam(f"'model' is at most {MAX_MODEL_LENGTH} characters", param="model")
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidParam("'stream_options' must be an object", param="stream_options")
    include_usage = _bool(options or {}, "include_usage", "stream_options.include_usage")
    n = _number(body, "n", 1, 1, integer=True)
    del n  # one choice only
    max_tokens, max_tokens_name = _number(body, "max_completion_tokens", 1, 1_000_000, integer=True), "max_completion_tokens"
    if max_tokens is None:
        max_tokens, max_tokens_name = _number(body, "max_tokens", 1, 1_000_000, integer=True), "max_tokens"
    return CompletionRequest(
        model=model.strip(),
        messages=_messages(body),
        tools=_tools(body),
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0, 2),
        top_p=_number(body, "top_p", 0, 1),
        passthrough=_passthrough(body),
        max_tokens_name=max_tokens_name,
        metadata=_metadata(body),
    )


def parse_body(raw: bytes) -> dict:
    """Return the JSON object in `raw`; raise `InvalidParam` (400) for bytes that are not one, or
    for text no store or gateway can take (an unpaired `\\ud800` escape, a NUL: `unstorable_text`)."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidParam("the request body is not valid JSON", param=None) from exc
    if not isinstance(data, dict):
        raise InvalidParam("the request body must be a JSON object", param=None)
    refusal = unstorable_text(data)
    if refusal is not None:
        raise InvalidParam(refusal.message, param=None)
    return data


# -- answers ------------------------------------------------------------------------------------


def model_body(agent, *, owned_by: str) -> dict:
    """Return one agent as an OpenAI `model` object: `{id: <agent name>, object, created (unix s), owned_by}`."""
    return {"id": agent.name, "object": "model", "created": int(agent.created_at.timestamp()), "owned_by": owned_by}


def tool_calls(ops: list[dict]) -> list[dict]:
    """Return a round's client-executed calls (`[{name, args}]`) as OpenAI `tool_calls` (ids minted here)."""
    return [
        {"id": "call_" + uuid.uuid4().hex[:24], "type": "function",
         "function": {"name": op["name"], "arguments": json.dumps(op.get("args") or {}, ensure_ascii=False)}}
        for op in ops
    ]


def usage_body(run) -> dict | None:
    """Return the run's token usage as OpenAI `usage`, or None when the gateway reported none
    (clients expect integers when `usage` is present: it is left out, never invented as 0).
    A count the gateway gave while the other is unknown is sent with the unknown one as 0."""
    if run.prompt_tokens is None and run.completion_tokens is None:
        return None
    prompt = run.prompt_tokens or 0
    completion = run.completion_tokens or 0
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def finish_reason(run) -> str:
    """Return the answer's `finish_reason`: `tool_calls` when the round handed calls back to the
    caller, the gateway's `length` / `content_filter` when it cut the reply, else `stop`."""
    if getattr(run, "ops", None):
        return str(OpenAIFinishReason.TOOL_CALLS)
    said = getattr(run, "finish_reason", "") or ""
    if said in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
        return str(said)
    return str(OpenAIFinishReason.STOP)


def completion_body(run, *, model: str) -> dict:
    """Return a finished `ok` run as a `chat.completion` (id = the run id; `model` = the agent's name)."""
    ops = getattr(run, "ops", None) or []
    # `refusal` is required (nullable) by OpenAI's document: a model's refusal is ordinary content here.
    message: dict = {"role": ChatRole.ASSISTANT, "content": run.output if (run.output or not ops) else None, "refusal": None}
    if ops:
        message["tool_calls"] = tool_calls(ops)
    return {  # `system_fingerprint` is left out: optional and deprecated in the document, and there is none
        "id": run.id,
        "object": "chat.completion",
        "created": int(run.created_at.timestamp()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason(run)}],
        **({"usage": usage} if (usage := usage_body(run)) is not None else {}),
        "session_id": run.session_id,
    }


def chunk_body(*, run_id: str, created: int, model: str, delta: dict | None = None, finish: str | None = None,
               usage: dict | None = None) -> dict:
    """Return one `chat.completion.chunk`: a delta (and finish reason) of choice 0, or, with
    `usage`, the usage chunk whose `choices` is empty."""
    body = {"id": run_id, "object": "chat.completion.chunk", "created": created, "model": model}
    if usage is not None:
        body["choices"] = []
        body["usage"] = usage
    else:
        body["choices"] = [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    return body
