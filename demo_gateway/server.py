"""A real OpenAI-compatible HTTP server on loopback: the tests' upstream and `make demo`'s gateway.

One copy serves both (issue 47). `python -m demo_gateway --port 8001` starts it in demo mode
(`Upstream(demo=True)`): the only model is `demo`; a user message `/tool NAME {json}` answers
`finish_reason: tool_calls` for that tool (when the request offers it), a tool result comes back
as "The tool NAME answered: …", `/slow TEXT` is echoed one word a second (a run long enough to
steer), anything else is echoed as "You said: …"; it streams word by word and reports usage (words
counted as tokens). It imports nothing of the project (import-linter).

It speaks `GET /v1/models` and `POST /v1/chat/completions`. Tests script what it answers:

    upstream.models = ["m1", "best"]
    upstream.script(
        Reply(status=429),                       # a busy answer
        Reply(content="hello"),                  # a normal completion
        Reply(tool_calls=[("calculator", {"expression": "2+2"})]),
        Reply(delay=2.0, content="slow"),
        Reply(hold=event, content="when released"),  # answers once `event` is set (≤ 10 s)
        Reply(empty=True),                       # 200 with no choices
    )

Unscripted requests answer `Reply(content=default_content, delay=default_delay)`. Every request body is kept in
`upstream.requests` (parsed JSON) for assertions.

A request with `"stream": true` is answered the way a gateway streams: `text/event-stream`
with `chat.completion.chunk` frames (a role chunk, the content in pieces, tool calls whose
arguments arrive as fragments by index, a finish chunk, a usage chunk when
`stream_options.include_usage` asks for it) and `data: [DONE]`. A `Reply` shapes it:

    Reply(content="hello world", chunks=["hel", "lo", " world"])  # exactly these pieces
    Reply(content="hello world", chunk_size=3)   # pieces of 3 characters
    Reply(content="abc", chunk_delay=0.3)        # each piece waits (a model's token latency)
    Reply(content="abcdef", chunk_size=2, fail_after=2)  # 2 pieces, then the connection drops
    Reply(content="abcdef", chunk_size=2, fail_after=2, fail_with="error")  # …then an error frame
    Reply(content="abcdef", chunk_size=2, pause_after=1, pause=event)  # 1 piece, then wait for `event`

`first_chunk_delay` waits before the first content piece (time to first token).

Gateways' own behaviours (issue 31): `Reply(finish="length")` ends with that finish reason;
`Reply(usage=False)` sends no usage even when asked (llama-cpp-python streams none);
`upstream.strict = True` validates like a strict server: a message whose `content` is not a
string (an assistant's `null` beside `tool_calls`: llama-cpp-python's validation) or a top-level
field outside llama-cpp-python's request model (a server that refuses unknown fields; that one
ignores them) → 500 with a pydantic-style dump in an `internal_server_error`, as
llama-cpp-python answers its validation failures. Every request's headers are kept in
`upstream.request_headers` (same order as `requests`).

Every streamed answer is followed in `upstream.streams` (`Streamed`: the pieces sent, whether the
body was sent to its end, whether the client closed the connection before that — a cancelled
request, issue 25).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One scripted answer of the upstream."""

    content: str | None = "ok"
    status: int = 200
    tool_calls: list[tuple[str, dict]] | None = None
    delay: float = 0.0
    empty: bool = False
    prompt_tokens: int = 11
    completion_tokens: int = 7
    error_body: dict | None = None
    model: str | None = None  # scripted for this model only (None: any)
    hold: threading.Event | None = None  # answer only once this is set (at most HOLD_SECONDS)
    extra: dict = field(default_factory=dict)
    # Streaming (a request with "stream": true); see the module doc.
    chunks: list[str] | None = None  # the content's pieces, exactly (they must concatenate to `content`)
    chunk_size: int | None = None  # else pieces of this many characters (None: the content in one piece)
    chunk_delay: float = 0.0  # seconds before each piece
    first_chunk_delay: float = 0.0  # seconds before the first piece (time to first token)
    fail_after: int | None = None  # send this many content pieces, then fail
    fail_with: str = "drop"  # "drop": close the connection mid-body; "error": an SSE error frame, then close
    pause_after: int | None = None  # send this many pieces, then wait for `pause` (≤ HOLD_SECONDS); not streamed: wait, then answer
    pause: threading.Event | None = None
    finish: str | None = None  # the finish reason sent (None: tool_calls with tool calls, else stop)
    usage: bool = True  # False: no usage, whatever the request asks

    def pieces(self) -> list[str]:
        """Return the content's streamed pieces."""
        text = self.content or ""
        if self.chunks is not None:
            return list(self.chunks)
        if not text:
            return []
        if not self.chunk_size:
            return [text]
        return [text[i : i + self.chunk_size] for i in range(0, len(text), self.chunk_size)]


HOLD_SECONDS = 10.0

#: The top-level fields llama-cpp-python's `CreateChatCompletionRequest` declares (it refuses others).
STRICT_FIELDS = {"model", "messages", "functions", "function_call", "tools", "tool_choice", "max_tokens", "max_completion_tokens",
                 "logprobs", "top_logprobs", "temperature", "top_p", "min_p", "stop", "stream", "stream_options", "presence_penalty",
                 "frequency_penalty", "logit_bias", "seed", "response_format", "n", "user", "top_k", "repeat_penalty",
                 "parallel_tool_calls", "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta", "grammar", "logit_bias_type"}


def strict_errors(body: dict) -> list[dict]:
    """Return pydantic-style errors for what llama-cpp-python's request validation refuses."""
    errors = []
    for index, message in enumerate(body.get("messages") or []):
        if "content" in message and not isinstance(message["content"], (str, list)):
            errors.append({"type": "string_type", "loc": ("body", "messages", index, "typed_dict", "content"),
                           "msg": "Input should be a valid string", "input": message["content"]})
    for name in body:
        if name not in STRICT_FIELDS and not name.startswith("_"):
            errors.append({"type": "extra_forbidden", "loc": ("body", name), "msg": "Extra inputs are not permitted", "input": body[name]})
    return errors


@dataclass
class Streamed:
    """One streamed answer as the upstream sent it: `sent` content pieces of `pieces`, `finished`
    when the body's last chunk went out, `client_closed` when a write failed because the client
    had closed the connection first (the stream was cancelled before its end)."""

    pieces: int
    sent: int = 0
    finished: bool = False
    client_closed: bool = False


#: The model name the demo gateway serves (`make demo` sets AGENTS_DEFAULT_MODEL to it).
DEMO_MODEL = "demo"
#: A user message that asks the demo gateway for a tool call: `/tool calculator {"expression":"6*7"}`.
TOOL_COMMAND = re.compile(r"^/tool\s+(?P<name>[A-Za-z0-9_.:-]+)\s*(?P<args>.*)$", re.S)
#: A user message `/slow TEXT` is echoed one word every this many seconds: a run long enough to
#: watch, pause and stop (the docs' steering examples).
SLOW_WORD_SECONDS = 1.0
SLOW_COMMAND = re.compile(r"^/slow\b\s*(?P<text>.*)$", re.S)


def _text(content) -> str:
    """Return a message's text: a string as is, a list of parts joined (their `text` fields)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _words(text: str) -> int:
    return len(text.split())


def demo_reply(body: dict) -> Reply:
    """Return the demo gateway's answer to a chat completions request `body` (a dict as sent).

    - the last message is a tool result → "The tool NAME answered: RESULT";
    - the last user message is `/tool NAME {json}` and the request offers NAME → a tool call of
      NAME with those arguments (`finish_reason: tool_calls`); NAME not offered, or arguments
      that are not a JSON object → a sentence saying so;
    - the last user message is `/slow TEXT` → "You said: TEXT", one word every `SLOW_WORD_SECONDS`;
    - otherwise → "You said: TEXT".

    Usage counts whitespace-separated words as tokens; the content streams word by word.
    """
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    prompt_tokens = sum(_words(_text(m.get("content"))) for m in messages)
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        names = {call.get("id"): (call.get("function") or {}).get("name", "?")
                 for m in messages if m.get("role") == "assistant" for call in m.get("tool_calls") or []}
        content = f"The tool {names.get(last.get('tool_call_id'), 'you called')} answered: {_text(last.get('content'))}"
        return _demo_text(content, prompt_tokens)
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    text = _text(user.get("content")).strip()
    command = TOOL_COMMAND.match(text)
    if command:
        name, raw = command.group("name"), command.group("args").strip() or "{}"
        offered = [(t.get("function") or {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            return _demo_text(f"The arguments of /tool {name} must be a JSON object, e.g. /tool calculator {{\"expression\": \"6*7\"}}.", prompt_tokens)
        if name not in offered:
            listed = ", ".join(n for n in offered if n) or "none"
            return _demo_text(f"The tool {name} is not offered to this agent (offered: {listed}).", prompt_tokens)
        return Reply(content=None, tool_calls=[(name, arguments)], prompt_tokens=prompt_tokens, completion_tokens=_words(raw) + 1)
    slow = SLOW_COMMAND.match(text)
    if slow:
        reply = _demo_text(f"You said: {slow.group('text').strip()}", prompt_tokens)
        reply.chunk_delay = SLOW_WORD_SECONDS
        return reply
    return _demo_text(f"You said: {text}" if text else "You said nothing.", prompt_tokens)


def _demo_text(content: str, prompt_tokens: int) -> Reply:
    return Reply(content=content, chunks=re.findall(r"\S+\s*|\s+", content), prompt_tokens=prompt_tokens,
                 completion_tokens=_words(content))


class Upstream:
    """The loopback server: start with `Upstream().start()`, stop with `.stop()`.

    `demo=True` is `make demo`'s gateway: unscripted requests get `demo_reply(body)` and the only
    model listed is `demo`; otherwise (the tests) they get `default_content` ("ok").
    """

    def __init__(self, *, demo: bool = False) -> None:
        self.demo = demo
        self.models: list[str] = [DEMO_MODEL] if demo else ["test-model", "best"]
        self.default_content = "ok"
        self.default_delay = 0.0  # seconds an unscripted reply waits (a model's latency, for benchmarks)
        self.requests: list[dict] = []
        self.request_headers: list[dict] = []
        self.arrivals: list[float] = []  # `time.perf_counter()` when each POST's body was read
        self.strict = False  # validate messages as llama-cpp-python does (see the module doc)
        # A model's context window in "tokens" (whitespace-separated words of the messages):
        # over it, a streamed request gets llama-cpp-python's 200, role chunk, broken stream;
        # one not streamed its 400 `context_length_exceeded`. None: no limit.
        self.context_window: int | None = None
        # The tokenize route served: "llama.cpp" (POST /tokenize → tokens), "llama-cpp-python"
        # (POST /extras/tokenize/count → count), None (404, as OpenAI and LiteLLM answer).
        self.tokenizer: str | None = None
        self.model_extra: dict[str, dict] = {}  # model → extra fields of its /models entry (`max_model_len`…)
        self.connections = 0  # TCP connections accepted (a client that keeps alive opens one)
        self.streams: list[Streamed] = []  # every streamed answer, in order
        self._script: list[Reply] = []
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue `replies`, answered in order by the next chat completions."""
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        """Forget the script and recorded requests."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.request_headers.clear()
            self.arrivals.clear()
            self.strict = False
            self.context_window = None
            self.tokenizer = None
            self.streams.clear()
            self.model_extra = {}
            self.connections = 0
            self.default_delay = 0.0

    @property
    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r.get("_path", "").endswith("/chat/completions")]

    def _next(self, body: dict) -> Reply:
        model = body.get("model")
        with self._lock:
            for i, reply in enumerate(self._script):
                if reply.model is None or reply.model == model:
                    return self._script.pop(i)
        if self.demo:
            return demo_reply(body)
        return Reply(content=self.default_content, delay=self.default_delay)

    def start(self, *, host: str = "127.0.0.1", port: int = 0) -> Upstream:
        """Listen on `host`:`port` (0: a free port; see `base_url`) in a daemon thread; return self."""
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes; without TCP_NODELAY the second waits for
            # the client's delayed ACK (~40 ms on Linux), which no real gateway adds.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def setup(self):  # once per connection (`handle` then serves its requests)
                super().setup()
                with upstream._lock:
                    upstream.connections += 1

            def _send(self, status: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _write_chunk(self, text: str) -> None:
                raw = text.encode()
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                self.wfile.flush()

            def _frame(self, data) -> None:
                self._write_chunk("data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n")

            def _stream(self, reply: Reply, body: dict, base: dict, followed: Streamed) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = {**base, "object": "chat.completion.chunk"}

                def choice(delta: dict, finish: str | None = None) -> dict:
                    return {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

                if reply.empty:
                    self._frame("[DONE]")
                    self._write_chunk("")
                    return
                self._frame(choice({"role": "assistant", "content": ""}))
                pieces = reply.pieces() if not reply.tool_calls or reply.content != "ok" else []
                if reply.first_chunk_delay:
                    time.sleep(reply.first_chunk_delay)  # a slow model on purpose (the script asks for it), not a wait
                for sent, piece in enumerate(pieces):
                    if reply.fail_after is not None and sent >= reply.fail_after:
                        self._fail(reply)
                        return
                    if reply.pause_after is not None and sent == reply.pause_after and reply.pause is not None:
                        reply.pause.wait(HOLD_SECONDS)
                    if reply.chunk_delay:
                        time.sleep(reply.chunk_delay)  # a slow model on purpose, not a wait
                    self._frame(choice({"content": piece}))
                    followed.sent += 1
                if reply.fail_after is not None and reply.fail_after >= len(pieces):
                    self._fail(reply)
                    return
                for index, (name, args) in enumerate(reply.tool_calls or []):
                    raw = json.dumps(args)
                    self._frame(choice({"tool_calls": [{"index": index, "id": "call_" + uuid.uuid4().hex[:8], "type": "function",
                                                        "function": {"name": name, "arguments": ""}}]}))
                    for i in range(0, len(raw), 7):  # arguments arrive as fragments, as gateways send them
                        self._frame(choice({"tool_calls": [{"index": index, "function": {"arguments": raw[i : i + 7]}}]}))
                self._frame(choice({}, reply.finish or ("tool_calls" if reply.tool_calls else "stop")))
                if reply.usage and (body.get("stream_options") or {}).get("include_usage"):
                    usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                             "total_tokens": reply.prompt_tokens + reply.completion_tokens}
                    self._frame({**chunk, "choices": [], "usage": usage})
                self._frame("[DONE]")
                self._write_chunk("")  # the chunked body's end
                followed.finished = True

            def _fail(self, reply: Reply) -> None:
                if reply.fail_with == "error":
                    self._frame({"error": {"message": "upstream failed mid-stream", "type": "server_error"}})
                    self._write_chunk("")
                self.close_connection = True  # "drop": the body ends without its last chunk

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    upstream.requests.append({"_path": self.path})
                    self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 0, "owned_by": "test", **upstream.model_extra.get(m, {})}
                                               for m in upstream.models]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                body["_path"] = self.path
                upstream.arrivals.append(time.perf_counter())
                upstream.requests.append(body)
                upstream.request_headers.append({k.lower(): v for k, v in self.headers.items()})
                path = self.path.rstrip("/")
                if path == "/tokenize" and upstream.tokenizer == "llama.cpp":
                    self._send(200, {"tokens": list(range(len(str(body.get("content", "")).split())))})
                    return
                if path == "/extras/tokenize/count" and upstream.tokenizer == "llama-cpp-python":
                    self._send(200, {"count": len(str(body.get("input", "")).split())})
                    return
                if not path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": "not found"}})
                    return
                prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
                if upstream.context_window is not None and prompt >= upstream.context_window:
                    if body.get("stream") is True:  # llama-cpp-python: the role chunk, then the stream breaks
                        broken = Reply(content="", fail_after=0)
                        self._stream(broken, body, {"id": "chatcmpl-x", "created": 0, "model": body.get("model", "")}, Streamed(pieces=len(broken.pieces())))
                        return
                    window = upstream.context_window
                    self._send(400, {"error": {
                        "message": f"This model's maximum context length is {window} tokens. However, you requested {prompt} tokens "
                                   f"({prompt} in the messages, 0 in the completion). Please reduce the length of the messages or completion.",
                        "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
                    return
                if upstream.strict:
                    errors = strict_errors(body)
                    if errors:
                        self._send(500, {"error": {"message": f"{len(errors)} validation errors: {errors!r}", "type": "internal_server_error",
                                                   "param": None, "code": None}})
                        return
                reply = upstream._next(body)
                if reply.hold is not None:
                    reply.hold.wait(HOLD_SECONDS)
                if reply.delay:
                    time.sleep(reply.delay)  # a slow model on purpose, not a wait
                if reply.status != 200:
                    self._send(reply.status, reply.error_body or {"error": {"message": f"upstream says {reply.status}", "type": "test"}})
                    return
                base = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion", "created": int(time.time()), "model": body.get("model", "")}
                if body.get("stream") is True:
                    followed = Streamed(pieces=len(reply.pieces()))
                    upstream.streams.append(followed)
                    try:
                        self._stream(reply, body, base, followed)
                    except (BrokenPipeError, ConnectionResetError):
                        followed.client_closed = True
                        self.close_connection = True
                    return
                if reply.pause_after is not None and reply.pause is not None:  # the whole answer waits as a stream's rest would
                    reply.pause.wait(HOLD_SECONDS)
                if reply.empty:
                    self._send(200, {**base, "choices": [], "usage": None})
                    return
                message: dict = {"role": "assistant", "content": reply.content}
                finish = reply.finish or "stop"
                if reply.tool_calls:
                    message["tool_calls"] = [
                        {"id": "call_" + uuid.uuid4().hex[:8], "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                        for name, args in reply.tool_calls
                    ]
                    message["content"] = reply.content if reply.content != "ok" else None
                    finish = reply.finish or "tool_calls"
                usage = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                         "total_tokens": reply.prompt_tokens + reply.completion_tokens} if reply.usage else None
                self._send(200, {
                    **base,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                    **reply.extra,
                })

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
