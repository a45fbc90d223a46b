"""Replays gateway transcripts (request/response exchanges) on loopback, byte for byte.

A transcript file (`tests/support/transcripts/<server>.json`) says which server and version it
is of, its `provenance` (recorded from a running server, or written from the server's source
and documentation: each file says which, never passed off as the other), and its exchanges by
name. Each exchange is the answer to one POST: `status`, `headers`, and either `json` (a body)
or `sse` (the `data:` payloads of a `text/event-stream`, each sent as its own chunk) with
`end`: `done` (the chunked body ends cleanly) or `drop` (the connection closes mid-body: a
server whose stream failed after its 200). `request` holds what the server was sent when it
was recorded, for reading (the tests assert what this platform sends now).

    replay.play("llama-cpp-python", "context_overflow_stream", "context_overflow_probe")

answers the next two chat completions with those exchanges, in order; requests to other
paths (`/extras/tokenize/count`, `/tokenize`) take the next exchange whose `path` is theirs
(404 when none is queued). Every request is kept in `requests` (body, `_path`) and its headers
in `request_headers`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TRANSCRIPTS = Path(__file__).parent / "transcripts"


def transcript(server: str) -> dict:
    """Return the transcript file of `server` (parsed)."""
    return json.loads((TRANSCRIPTS / f"{server}.json").read_text())


class Replay:
    """The loopback replayer: `Replay().start()`, `.play(server, *names)`, `.stop()`."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.request_headers: list[dict] = []
        self.models: list[dict] = []
        self._queue: list[dict] = []
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def play(self, server: str, *names: str) -> None:
        """Queue the named exchanges of `server`'s transcript; its model list is served too."""
        data = transcript(server)
        with self._lock:
            self.models = data.get("models", [])
            self._queue.extend(data["exchanges"][name] for name in names)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.request_headers.clear()
            self.models = []

    @property
    def chat_requests(self) -> list[dict]:
        return [r for r in self.requests if r["_path"].endswith("/chat/completions")]

    @property
    def unplayed(self) -> int:
        return len(self._queue)

    def _next(self, path: str) -> dict | None:
        with self._lock:
            for index, exchange in enumerate(self._queue):
                if exchange.get("path", "/v1/chat/completions") == path:
                    return self._queue.pop(index)
        return None

    def start(self) -> Replay:
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _json(self, status: int, body, headers: dict | None = None) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {"Content-Type": "application/json"}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _chunk(self, raw: bytes) -> None:
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                self.wfile.flush()

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": replay.models})
                else:
                    self._json(404, {"detail": "Not Found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.rstrip("/")
                replay.requests.append({**body, "_path": path})
                replay.request_headers.append({k.lower(): v for k, v in self.headers.items()})
                exchange = replay._next(path)
                if exchange is None:
                    self._json(404, {"detail": "Not Found"})
                    return
                response = exchange["response"]
                if "sse" not in response:
                    self._json(response["status"], response.get("json"), response.get("headers"))
                    return
                self.send_response(response["status"])
                for name, value in (response.get("headers") or {"Content-Type": "text/event-stream"}).items():
                    self.send_header(name, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for data in response["sse"]:
                    self._chunk(f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode())
                if response.get("end", "done") == "drop":
                    self.close_connection = True  # the body ends without its last chunk
                    return
                self._chunk(b"")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server:
            self.server.shutdown()
            self.server.server_close()
