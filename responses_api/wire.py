"""The OpenAI Responses API wire format: the create request read and checked, items turned into a
prompt, the `response` object and its stream events shaped. No I/O here.

`response_request(body)` turns a `POST …/responses` JSON body into a `ResponseRequest` or raises
`InvalidParam` (400, OpenAI's error object naming `param`). Supported: `model` (an agent),
`input` (a string, or `message` / `function_call` / `function_call_output` items with text
content), `instructions`, function `tools`, `tool_choice`, `parallel_tool_calls`, `text.format`
(`text`, `json_object`, `json_schema`), `max_output_tokens`, `temperature`, `top_p`, `metadata`,
`store`, `stream`, `background`, `previous_response_id`, `conversation`, and the echoed
`truncation`, `user`, `safety_identifier`, `prompt_cache_key`, `service_tier`. Refused, naming
the field: hosted tools, reasoning, image/audio/file inputs, item references, and any field not
listed (none is dropped in silence).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from agents_site.ids import mint_id
from agents_site.vocabulary import ResponseStatus
from agents_site.wire import MAX_SCHEMA_DEPTH, json_depth
from openai_api.errors import InvalidParam

MAX_TEXT_BYTES = 128 * 1024
MAX_ITEMS = 1000
MAX_TOOLS = 128
MAX_MODEL_LENGTH = 128
MAX_INSTRUCTIONS_BYTES = 64 * 1024
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY = 64
MAX_METADATA_VALUE = 512
FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MESSAGE_ROLES = ("user", "assistant", "system", "developer")
TOOL_CHOICE_WORDS = ("none", "auto", "required")
TEXT_FORMATS = ("text", "json_object", "json_schema")
#: Fields accepted and echoed on the `response` object, with no effect on the run.
ECHOED = ("truncation", "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier")
HANDLED = frozenset({"model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
                     "max_output_tokens", "temperature", "top_p", "metadata", "store", "stream", "stream_options",
                     "background", "previous_response_id", "conversation", "include", "reasoning", "top_logprobs",
                     *ECHOED})
#: Why a refused content part or item type is refused.
UNSUPPORTED_PARTS = ("input_image", "input_file", "input_audio")


@dataclass
class ResponseRequest:
    """A checked create request.

    `input_items` are Responses items with ids (`message`, `function_call`,
    `function_call_output`), as `input_items` lists them; `tools` the caller's function tools as
    the `response` shows them and `chat_tools` the same as chat-completions definitions;
    `gateway_options` the chat-completions fields passed to the gateway (`tool_choice`,
    `response_format`, `parallel_tool_calls`).
    """

    model: str
    input_items: list[dict]
    instructions: str | None = None
    tools: list[dict] = field(default_factory=list)
    chat_tools: list[dict] = field(default_factory=list)
    tool_choice: object = "auto"
    parallel_tool_calls: bool = True
    text: dict = field(default_factory=lambda: {"format": {"type": "text"}})
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    metadata: dict = field(default_factory=dict)
    store: bool = True
    stream: bool = False
    background: bool = False
    previous_response_id: str | None = None
    conversation: str | None = None
    echoed: dict = field(default_factory=dict)
    gateway_options: dict = field(default_factory=dict)

    def settings(self) -> dict:
        """Return what the `response` object echoes of this request (kept as `StoredResponse.request`)."""
        return {"instructions": self.instructions, "tools": self.tools, "tool_choice": self.tool_choice,
                "parallel_tool_calls": self.parallel_tool_calls, "text": self.text,
                "max_output_tokens": self.max_output_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "metadata": self.metadata, "store": self.store, "background": self.background, **self.echoed}

    def input_text(self) -> str:
        """Return the run's recorded input: the last user message's text, else the last function output ("" for none)."""
        for item in reversed(self.input_items):
            if item["type"] == "message" and item["role"] == "user":
                return item_text(item)
        for item in reversed(self.input_items):
            if item["type"] == "function_call_output":
                return item["output"]
        return ""


def item_text(item: dict) -> str:
    """Return a message item's text: its text parts joined by newlines."""
    return "\n".join(part.get("text", "") for part in item.get("content") or [])


# -- the request ----------------------------------------------------------------------------------


def _bool(body: dict, name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidParam(f"'{name}' must be a boolean (true or false)", param=name)
    return value


def _number(body: dict, name: str, low: float, high: float, *, integer: bool = False):
    value = body.get(name)
    if value is None:
        return None
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not (low <= value <= high):
        what = "an integer" if integer else "a number"
        raise InvalidParam(f"'{name}' must be {what} from {low:g} to {high:g}", param=name)
    return value


def _text(value, param: str) -> str:
    if not isinstance(value, str):
        raise InvalidParam(f"{param} must be a string", param=param)
    if len(value.encode()) > MAX_TEXT_BYTES:
        raise InvalidParam(f"{param} is over {MAX_TEXT_BYTES // 1024} KiB", param=param)
    return value


def _message(item: dict, param: str) -> dict:
    role = item.get("role")
    if role not in MESSAGE_ROLES:
        raise InvalidParam(f"{param}.role must be one of: {', '.join(MESSAGE_ROLES)}", param=f"{param}.role")
    content = item.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(_text(content, f"{param}.content"))
    elif isinstance(content, list) and content:
        for index, part in enumerate(content):
            where = f"{param}.content[{index}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in UNSUPPORTED_PARTS:
                raise InvalidParam(f"{where}: '{kind}' inputs are not supported; send text parts (input_text)", param=where)
            if kind not in ("input_text", "output_text", "text") or not isinstance(part.get("text"), str):
                raise InvalidParam(f"{where} must be a text part {{type: 'input_text', text}}", param=where)
            texts.append(_text(part["text"], f"{where}.text"))
    else:
        raise InvalidParam(f"{param}.content must be a string or a non-empty list of text parts", param=f"{param}.content")
    if role == "assistant":
        parts = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []} for text in texts]
        return {"id": _id(item, "msg"), "type": "message", "role": role, "content": parts, "status": "completed"}
    parts = [{"type": "input_text", "text": text} for text in texts]
    return {"id": _id(item, "msg"), "type": "message", "role": role, "content": parts, "status": "completed"}


def _id(item: dict, prefix: str) -> str:
    given = item.get("id")
    if isinstance(given, str) and 0 < len(given) <= 64:
        return given
    return mint_id(prefix)


def _function_call(item: dict, param: str) -> dict:
    for name in ("call_id", "name", "arguments"):
        if not isinstance(item.get(name), str) or (name != "arguments" and not item[name]):
            raise InvalidParam(f"{param}.{name} must be a non-empty string", param=f"{param}.{name}")
    if not FUNCTION_NAME.match(item["name"]):
        raise InvalidParam(f"{param}.name must match ^[A-Za-z0-9_-]{{1,64}}$", param=f"{param}.name")
    _text(item["arguments"], f"{param}.arguments")
    return {"id": _id(item, "fc"), "type": "function_call", "call_id": item["call_id"][:64], "name": item["name"],
            "arguments": item["arguments"], "status": "completed"}


def _function_output(item: dict, param: str) -> dict:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id or len(call_id) > 64:
        raise InvalidParam(f"{param}.call_id must be the call's id (1 to 64 characters)", param=f"{param}.call_id")
    output = item.get("output")
    if isinstance(output, list):
        texts = []
        for index, part in enumerate(output):
            where = f"{param}.output[{index}]"
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in UNSUPPORTED_PARTS:
                raise InvalidParam(f"{where}: '{kind}' outputs are not supported; send text", param=where)
            if kind != "input_text" or not isinstance(part.get("text"), str):
                raise InvalidParam(f"{where} must be a text part {{type: 'input_text', text}}", param=where)
            texts.append(part["text"])
        output = "\n".join(texts)
    output = _text(output, f"{param}.output")
    return {"id": _id(item, "fco"), "type": "function_call_output", "call_id": call_id, "output": output,
            "status": "completed"}


def _items(body: dict) -> list[dict]:
    raw = body.get("input")
    if raw is None:
        raise InvalidParam("'input' is required: a string or a list of input items", param="input")
    if isinstance(raw, str):
        return [{"id": mint_id("msg"), "type": "message", "role": "user",
                 "content": [{"type": "input_text", "text": _text(raw, "input")}], "status": "completed"}]
    if not isinstance(raw, list) or not raw:
        raise InvalidParam("'input' must be a string or a non-empty list of input items", param="input")
    if len(raw) > MAX_ITEMS:
        raise InvalidParam(f"'input' holds at most {MAX_ITEMS} items", param="input")
    items = []
    for index, item in enumerate(raw):
        param = f"input[{index}]"
        if not isinstance(item, dict):
            raise InvalidParam(f"{param} must be an object", param=param)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            items.append(_message(item, param))
        elif kind == "function_call":
            items.append(_function_call(item, param))
        elif kind == "function_call_output":
            items.append(_function_output(item, param))
        elif kind == "reasoning":
            raise InvalidParam(f"{param}: reasoning items are not supported", param=f"{param}.type")
        else:
            raise InvalidParam(f"{param}.type {str(kind)[:40]!r} is not supported: send message, function_call or "
                               "function_call_output items", param=f"{param}.type")
    return items


def _tools(body: dict) -> tuple[list[dict], list[dict]]:
    tools = body.get("tools")
    if tools is None:
        return [], []
    if not isinstance(tools, list) or len(tools) > MAX_TOOLS:
        raise InvalidParam(f"'tools' must be a list of at most {MAX_TOOLS} function tools", param="tools")
    shown, chat = [], []
    for index, tool in enumerate(tools):
        param = f"tools[{index}]"
        if not isinstance(tool, dict):
            raise InvalidParam(f"{param} must be an object", param=param)
        if tool.get("type") != "function":
            raise InvalidParam(f"{param}.type {str(tool.get('type'))[:40]!r} is not supported: hosted tools are not served "
                               "here; give function tools (your own code) or the agent's own tools", param=f"{param}.type")
        name = tool.get("name")
        if not isinstance(name, str) or not FUNCTION_NAME.match(name):
            raise InvalidParam(f"{param}.name must match ^[A-Za-z0-9_-]{{1,64}}$", param=f"{param}.name")
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            raise InvalidParam(f"{param}.description must be a string", param=f"{param}.description")
        parameters = tool.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidParam(f"{param}.parameters must be a JSON Schema object", param=f"{param}.parameters")
        if json_depth(parameters, limit=MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
            raise InvalidParam(f"{param}.parameters nests deeper than {MAX_SCHEMA_DEPTH} levels", param=f"{param}.parameters")
        strict = tool.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise InvalidParam(f"{param}.strict must be a boolean", param=f"{param}.strict")
        shown.append({"type": "function", "name": name, "description": description, "parameters": parameters,
                      "strict": strict if strict is not None else True})
        function = {"name": name, **({"description": description} if description else {}),
                    "parameters": parameters or {"type": "object", "properties": {}}}
        if strict:
            function["strict"] = True
        chat.append({"type": "function", "function": function})
    return shown, chat


def _tool_choice(body: dict, names: set[str]) -> tuple[object, object]:
    """Return `(shown, for the gateway)`; the gateway gets nothing for the default `auto`."""
    choice = body.get("tool_choice")
    if choice is None or choice == "auto":
        return "auto", None
    if choice in TOOL_CHOICE_WORDS:
        return choice, choice
    if isinstance(choice, dict) and choice.get("type") == "function" and isinstance(choice.get("name"), str):
        if choice["name"] not in names:
            raise InvalidParam(f"tool_choice names {choice['name'][:64]!r}, which is not in 'tools'", param="tool_choice")
        return {"type": "function", "name": choice["name"]}, {"type": "function", "function": {"name": choice["name"]}}
    raise InvalidParam("'tool_choice' must be none, auto, required or {type: 'function', name}; hosted tool choices "
                       "are not supported", param="tool_choice")


def _text_format(body: dict) -> tuple[dict, dict | None]:
    """Return `(text as shown, the gateway's response_format or None)`."""
    text = body.get("text")
    if text is None:
        return {"format": {"type": "text"}}, None
    if not isinstance(text, dict):
        raise InvalidParam("'text' must be an object {format: {type: text | json_object | json_schema}}", param="text")
    unknown = [name for name in text if name not in ("format", "verbosity")]
    if unknown:
        raise InvalidParam(f"text.{unknown[0]} is not supported", param=f"text.{unknown[0]}")
    fmt = text.get("format") or {"type": "text"}
    if not isinstance(fmt, dict) or fmt.get("type") not in TEXT_FORMATS:
        raise InvalidParam("text.format.type must be text, json_object or json_schema", param="text.format.type")
    shown = {"format": fmt}
    if text.get("verbosity") is not None:
        if text["verbosity"] not in ("low", "medium", "high"):
            raise InvalidParam("text.verbosity must be low, medium or high", param="text.verbosity")
        shown["verbosity"] = text["verbosity"]
    if fmt["type"] == "text":
        return {"format": {"type": "text"}, **({"verbosity": shown["verbosity"]} if "verbosity" in shown else {})}, None
    if fmt["type"] == "json_object":
        return {**shown, "format": {"type": "json_object"}}, {"type": "json_object"}
    name, schema = fmt.get("name"), fmt.get("schema")
    if not isinstance(name, str) or not SCHEMA_NAME.match(name):
        raise InvalidParam("text.format.name must match ^[A-Za-z0-9_-]{1,64}$", param="text.format.name")
    if not isinstance(schema, dict):
        raise InvalidParam("text.format.schema must be a JSON Schema object", param="text.format.schema")
    if json_depth(schema, limit=MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise InvalidParam(f"text.format.schema nests deeper than {MAX_SCHEMA_DEPTH} levels", param="text.format.schema")
    strict = fmt.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidParam("text.format.strict must be a boolean", param="text.format.strict")
    description = fmt.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidParam("text.format.description must be a string", param="text.format.description")
    clean = {"type": "json_schema", "name": name, "schema": schema, "strict": bool(strict),
             **({"description": description} if description else {})}
    gateway = {"type": "json_schema", "json_schema": {key: value for key, value in clean.items() if key != "type"}}
    return {**shown, "format": clean}, gateway


def _metadata(body: dict) -> dict:
    metadata = body.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA_PAIRS:
        raise InvalidParam(f"'metadata' must be an object of at most {MAX_METADATA_PAIRS} pairs", param="metadata")
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY or not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            raise InvalidParam(f"metadata keys are at most {MAX_METADATA_KEY} characters and values strings of at most "
                               f"{MAX_METADATA_VALUE}", param=f"metadata.{key[:MAX_METADATA_KEY]}")
    return dict(metadata)


def _refused(body: dict) -> None:
    """Refuse (400, naming it) what this endpoint cannot honour, and any field it does not know."""
    for name in body:
        if name not in HANDLED:
            raise InvalidParam(f"'{name}' is not supported by this endpoint", param=name)
    if body.get("reasoning") not in (None, {}):
        raise InvalidParam("'reasoning' is not supported: the agents' models give no reasoning items", param="reasoning")
    if body.get("top_logprobs") not in (None, 0):
        raise InvalidParam("'top_logprobs' is not supported: token log-probabilities would bypass the masking of "
                           "credentials in replies", param="top_logprobs")
    include = body.get("include")
    if include not in (None, []):
        raise InvalidParam("'include' is not supported: no hosted tool, reasoning or log-probability output is served here",
                           param="include")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise InvalidParam("'stream_options' must be an object", param="stream_options")


def _optional_id(body: dict, name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, dict) and name == "conversation":
        value = value.get("id")
    if not isinstance(value, str) or not value.strip() or len(value) > 64:
        raise InvalidParam(f"'{name}' must be an id (1 to 64 characters)", param=name)
    return value.strip()


def response_request(body) -> ResponseRequest:
    """Check a create body; return the `ResponseRequest` or raise `InvalidParam` (400) naming the field."""
    if not isinstance(body, dict):
        raise InvalidParam("the request body must be a JSON object", param=None)
    _refused(body)
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise InvalidParam("'model' is required: the name or id of one of your agents", param="model")
    if len(model) > MAX_MODEL_LENGTH:
        raise InvalidParam(f"'model' is at most {MAX_MODEL_LENGTH} characters", param="model")
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise InvalidParam("'instructions' must be a string", param="instructions")
        if len(instructions.encode()) > MAX_INSTRUCTIONS_BYTES:
            raise InvalidParam(f"'instructions' is over {MAX_INSTRUCTIONS_BYTES // 1024} KiB", param="instructions")
    items = _items(body)
    tools, chat_tools = _tools(body)
    shown_choice, gateway_choice = _tool_choice(body, {tool["name"] for tool in tools})
    parallel = _bool(body, "parallel_tool_calls", True)
    text, response_format = _text_format(body)
    store = _bool(body, "store", True)
    background = _bool(body, "background", False)
    if background and not store:
        raise InvalidParam("a background response is stored: 'background': true needs 'store' true", param="background")
    previous = _optional_id(body, "previous_response_id")
    conversation = _optional_id(body, "conversation")
    if previous and conversation:
        raise InvalidParam("give 'previous_response_id' or 'conversation', not both", param="conversation")
    echoed = {}
    for name in ECHOED:
        if body.get(name) is not None:
            if not isinstance(body[name], str) or len(body[name]) > 256:
                raise InvalidParam(f"'{name}' must be a string of at most 256 characters", param=name)
            echoed[name] = body[name]
    if echoed.get("truncation", "disabled") not in ("disabled", "auto"):
        raise InvalidParam("'truncation' must be disabled or auto", param="truncation")
    gateway = {}
    if gateway_choice is not None:
        gateway["tool_choice"] = gateway_choice
    if response_format is not None:
        gateway["response_format"] = response_format
    if chat_tools and body.get("parallel_tool_calls") is not None:
        gateway["parallel_tool_calls"] = parallel
    return ResponseRequest(
        model=model.strip(), input_items=items, instructions=instructions, tools=tools, chat_tools=chat_tools,
        tool_choice=shown_choice, parallel_tool_calls=parallel, text=text,
        max_output_tokens=_number(body, "max_output_tokens", 1, 1_000_000, integer=True),
        temperature=_number(body, "temperature", 0, 2), top_p=_number(body, "top_p", 0, 1), metadata=_metadata(body),
        store=store, stream=_bool(body, "stream", False), background=background, previous_response_id=previous,
        conversation=conversation, echoed=echoed, gateway_options=gateway,
    )


# -- items as a prompt ----------------------------------------------------------------------------


def prompt_messages(items: list[dict]) -> list[dict]:
    """Return Responses items as chat-completions messages, in order.

    A `message` becomes `{role, content}` (`developer` as `system`); consecutive `function_call`
    items become one assistant message's `tool_calls` (joined to the assistant text just before
    them); a `function_call_output` becomes a `tool` message answering its `call_id`.

    Example: `[user "2+2?", function_call add {call_1}, function_call_output call_1 "4"]` →
    `[user "2+2?", assistant tool_calls [call_1 add], tool call_1 "4"]`.
    """
    messages: list[dict] = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            role = "system" if item["role"] == "developer" else item["role"]
            messages.append({"role": role, "content": item_text(item)})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            elif last is not None and last["role"] == "assistant":
                last["tool_calls"] = [call]
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
    return messages


# -- answers --------------------------------------------------------------------------------------


def message_item(item_id: str, text: str, *, status: str = "completed") -> dict:
    """Return an assistant output `message` item holding `text` as one `output_text` part."""
    return {"id": item_id, "type": "message", "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def function_call_item(op: dict, *, item_id: str | None = None, call_id: str | None = None) -> dict:
    """Return a client-executed call (`{name, args}` of the run's ops) as a `function_call` output item."""
    return {"id": item_id or mint_id("fc"), "type": "function_call", "status": "completed",
            "call_id": call_id or mint_id("call"), "name": op["name"],
            "arguments": json.dumps(op.get("args") or {}, ensure_ascii=False)}


def usage_body(run) -> dict | None:
    """Return the run's token usage as the `response`'s `usage`, or None when the gateway reported none."""
    if run.prompt_tokens is None and run.completion_tokens is None:
        return None
    prompt, completion = run.prompt_tokens or 0, run.completion_tokens or 0
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


def response_body(*, run, status: str, model: str, settings: dict, output: list[dict], conversation_id: str = "",
                  previous_response_id: str = "") -> dict:
    """Return the `response` object of `run` (its id is the run's) in `status` (`response_status`).

    `settings` is the request's echo (`ResponseRequest.settings()`); `output` the output items
    (`[]` until the run finished). A failed response's `error` is `{code: server_error,
    message: <the run's error>}`; an incomplete one says why in `incomplete_details`.
    """
    finished = status in ResponseStatus.TERMINAL
    error = None
    if status == ResponseStatus.FAILED:
        error = {"code": "server_error", "message": (run.error or "the run failed")[:2000]}
    incomplete = None
    if status == ResponseStatus.INCOMPLETE:
        incomplete = {"reason": "content_filter" if run.finish_reason == "content_filter" else "max_output_tokens"}
    body = {
        "id": run.id,
        "object": "response",
        "created_at": int(run.created_at.timestamp()),
        "status": str(status),
        "background": bool(settings.get("background")),
        "completed_at": int(run.finished_at.timestamp()) if status == ResponseStatus.COMPLETED and run.finished_at else None,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": settings.get("instructions"),
        "max_output_tokens": settings.get("max_output_tokens"),
        "model": model,
        "output": output if finished else [],
        "parallel_tool_calls": settings.get("parallel_tool_calls", True),
        "previous_response_id": previous_response_id or None,
        "conversation": {"id": conversation_id} if conversation_id else None,
        "reasoning": None,
        "store": settings.get("store", True),
        "temperature": settings.get("temperature"),
        "text": settings.get("text") or {"format": {"type": "text"}},
        "tool_choice": settings.get("tool_choice", "auto"),
        "tools": settings.get("tools") or [],
        "top_p": settings.get("top_p"),
        "truncation": settings.get("truncation", "disabled"),
        "metadata": settings.get("metadata") or {},
    }
    usage = usage_body(run) if finished else None
    if usage is not None:  # not nullable in OpenAI's schema: left out while unknown, never invented as zeros
        body["usage"] = usage
    for name in ("user", "safety_identifier", "prompt_cache_key", "service_tier"):
        if settings.get(name) is not None:
            body[name] = settings[name]
    return body


def input_items_page(items: list[dict], *, limit: int, order: str, after: str | None) -> dict:
    """Return one page of a response's input items as OpenAI's `list` (`order` desc: newest first)."""
    ordered = list(reversed(items)) if order == "desc" else list(items)
    if after:
        ids = [item["id"] for item in ordered]
        if after not in ids:
            raise InvalidParam(f"'after' {after[:64]!r} names no input item of this response", param="after")
        ordered = ordered[ids.index(after) + 1:]
    page = ordered[:limit]
    return {"object": "list", "data": page, "has_more": len(ordered) > limit,
            "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None}


class EventWriter:
    """The stream events of one response, in order, each with its `sequence_number` (dense from `start`).

    `emit(event)` is called with each event as it is made (a live SSE stream, or the store for a
    background response). The writer also builds the output items as the events describe them,
    so the stream and the stored response show the same ids: `items` once `finish` was called.
    """

    def __init__(self, *, emit, start: int = 0) -> None:
        self.emit_to = emit
        self.sequence = start
        self.items: list[dict] = []
        self.message_id = mint_id("msg")
        self.text: str | None = None  # the open message's text so far; None when no message is open
        self.message_done = False

    def emit(self, kind: str, **fields) -> dict:
        """Make one event of `kind` with the next sequence number and hand it on; return it."""
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        self.emit_to(event)
        return event

    def lifecycle(self, kind: str, response: dict) -> None:
        """Emit `response.created` / `response.queued` / `response.in_progress` / a terminal event with `response`."""
        self.emit(kind, response=response)

    def delta(self, text: str) -> None:
        """Emit an `output_text` delta, opening the message item (and its part) first when needed."""
        if not text or self.message_done:
            return
        if self.text is None:
            self.text = ""
            item = {"id": self.message_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            self.emit("response.output_item.added", output_index=len(self.items), item=item)
            self.emit("response.content_part.added", item_id=self.message_id, output_index=len(self.items),
                      content_index=0, part={"type": "output_text", "text": "", "annotations": [], "logprobs": []})
        self.text += text
        self.emit("response.output_text.delta", item_id=self.message_id, output_index=len(self.items), content_index=0,
                  delta=text, logprobs=[])

    def close_message(self, text: str | None = None, *, status: str = "completed") -> None:
        """Close the message item with its whole `text` (the run's recorded output wins over the deltas)."""
        if self.message_done:
            return
        if self.text is None and not text:
            return
        if self.text is None:
            self.delta(text)
        whole = text if text is not None else self.text
        index = len(self.items)
        part = {"type": "output_text", "text": whole, "annotations": [], "logprobs": []}
        self.emit("response.output_text.done", item_id=self.message_id, output_index=index, content_index=0, text=whole,
                  logprobs=[])
        self.emit("response.content_part.done", item_id=self.message_id, output_index=index, content_index=0, part=part)
        item = message_item(self.message_id, whole, status=status)
        self.emit("response.output_item.done", output_index=index, item=item)
        self.items.append(item)
        self.message_done = True

    def calls(self, ops: list[dict]) -> None:
        """Emit each client-executed call as a `function_call` item (added, arguments delta and done, done)."""
        if self.text is not None:
            self.close_message()
        for op in ops:
            done = function_call_item(op)
            index = len(self.items)
            self.emit("response.output_item.added", output_index=index, item={**done, "arguments": "", "status": "in_progress"})
            self.emit("response.function_call_arguments.delta", item_id=done["id"], output_index=index,
                      delta=done["arguments"])
            self.emit("response.function_call_arguments.done", item_id=done["id"], name=done["name"], output_index=index,
                      arguments=done["arguments"])
            self.emit("response.output_item.done", output_index=index, item=done)
            self.items.append(done)

    def finish(self, *, text: str, ops: list[dict], status: str) -> list[dict]:
        """Close what is open with the run's recorded `text` and `ops`; return the output items.

        Calls heard while streaming are not emitted again; `text` closes the message (opened
        now if no delta was heard). A failed or cancelled run keeps only what was closed.
        """
        if status in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
            heard_calls = sum(1 for item in self.items if item["type"] == "function_call")
            if not self.message_done and (text or self.text is not None):
                item_status = "incomplete" if status == ResponseStatus.INCOMPLETE else "completed"
                if self.text is None and text:
                    self.delta(text)
                self.close_message(text, status=item_status)
            if heard_calls == 0 and ops:
                self.calls(ops)
        return list(self.items)


def terminal_event(status: str) -> str:
    """Return the stream event that ends a response in `status` (`response.completed`, …).

    OpenAI's stream has no `response.cancelled` event: a cancelled response's stream ends with an
    `error` event (code `response_cancelled`), and retrieving it shows `status: cancelled`.
    """
    return {ResponseStatus.COMPLETED: "response.completed", ResponseStatus.INCOMPLETE: "response.incomplete",
            ResponseStatus.FAILED: "response.failed"}.get(status, "error")
