"""Record a gateway transcript from a running OpenAI-compatible server (issue 31 item 5).

    .venv/bin/python scripts/record-gateway-transcript.py http://127.0.0.1:PORT/v1 gemma-3-270m \
        "llama-cpp-python 0.3.36 (…)" tests/support/transcripts/llama-cpp-python-recorded.json

Sends the exchanges below — shaped the way this platform sends them (`stream` with
`stream_options.include_usage`, `max_tokens`, tool turns with empty-string content) — to the
server, and writes each answer as it came: status, content type, and either the JSON body or
every `data:` payload of the stream with how the body ended (`done`: the chunked body ended
cleanly; `drop`: the connection broke). The file's `provenance` says RECORDED, with the date and
the server's command line given as the third argument. `RECORD_API_KEY`, when set, is sent as
the bearer token (a proxy's master key; it is not written to the file). `tests/support/replay.py`
replays it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys

import httpx

PROMPT = "Say hi in five words."
TOOLS = [{"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression.",
                                           "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                                                          "required": ["expression"]}}}]


def exchanges(model: str) -> dict[str, dict]:
    """Return the requests to record, by exchange name (`path` defaults to the chat completions route)."""
    stream = {"model": model, "stream": True, "stream_options": {"include_usage": True}}
    user = [{"role": "user", "content": PROMPT}]
    tool_turns = [{"role": "user", "content": "What is 6*7? Use the calculator."},
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
                                                                        "function": {"name": "calculator", "arguments": "{\"expression\": \"6*7\"}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
    over = [{"role": "user", "content": "word " * 3000}]
    return {
        "plain_stream": {"request": {**stream, "messages": user, "max_tokens": 64}},
        "truncated_stream": {"request": {**stream, "messages": [{"role": "user", "content": "Write a long story about a cat."}], "max_tokens": 5}},
        "tool_offered_stream": {"request": {**stream, "messages": tool_turns[:1], "tools": TOOLS, "max_tokens": 64}},
        "tool_result_answer": {"request": {**stream, "messages": tool_turns, "tools": TOOLS, "max_tokens": 64}},
        "null_content_refused": {"request": {**stream, "messages": [tool_turns[0], {**tool_turns[1], "content": None}, tool_turns[2]],
                                             "tools": TOOLS, "max_tokens": 64}},
        "context_overflow_stream": {"request": {**stream, "messages": over, "max_tokens": 64}},
        "context_overflow_probe": {"request": {"model": model, "messages": over, "max_tokens": 1}},
        "tokenize_count": {"path": "/extras/tokenize/count", "request": {"input": "hello", "model": model}},
        "unknown_model_stream": {"request": {**stream, "model": "no-such-model", "messages": user, "max_tokens": 8}},
    }


def record_one(client: httpx.Client, root: str, path: str, body: dict) -> dict:
    """POST `body` to `root + path`; return the recorded response."""
    url = root + path
    with client.stream("POST", url, json=body) as response:
        content_type = response.headers.get("content-type", "")
        recorded: dict = {"status": response.status_code, "headers": {"Content-Type": content_type}}
        if not content_type.startswith("text/event-stream"):
            recorded["json"] = json.loads(response.read() or b"null")
            return recorded
        payloads, end = [], "done"
        try:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    data = line[5:].strip()
                    payloads.append(data if data == "[DONE]" else json.loads(data))
        except httpx.HTTPError:
            end = "drop"
        recorded["sse"], recorded["end"] = payloads, end
        return recorded


def main() -> None:
    base, model, server, out = sys.argv[1:5]
    root = base.rstrip("/")
    host_root = root[: -len("/v1")] if root.endswith("/v1") else root
    data = {
        "server": server,
        "provenance": f"RECORDED from the running server on {datetime.date.today().isoformat()} by "
                      "scripts/record-gateway-transcript.py (requests shaped as this platform sends them; answers as they came).",
        "models": [],
        "exchanges": {},
    }
    headers = {"Authorization": f"Bearer {os.environ['RECORD_API_KEY']}"} if os.environ.get("RECORD_API_KEY") else {}
    with httpx.Client(timeout=600, headers=headers) as client:
        data["models"] = client.get(root + "/models").json().get("data", [])
    for name, exchange in exchanges(model).items():
        path = exchange.get("path")
        url_root, route = (host_root, path) if path else (root, "/chat/completions")
        # A connection of its own per exchange: after the empty streamed answer the server drops
        # the kept-alive connection without answering the next request on it.
        with httpx.Client(timeout=600, headers=headers) as client:
            entry = {"request": exchange["request"], "response": record_one(client, url_root, route, exchange["request"])}
        if path:
            entry["path"] = path
        data["exchanges"][name] = entry
        print(name, entry["response"]["status"], file=sys.stderr)
    with open(out, "w") as handle:
        json.dump(data, handle, indent=1, ensure_ascii=False)
        handle.write("\n")


if __name__ == "__main__":
    main()
