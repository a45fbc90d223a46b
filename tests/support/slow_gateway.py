"""A loopback gateway that answers every chat completion, streamed, after a fixed delay, serving
any number of requests at once on one event loop (one thread), for tests of many completions
waiting together.

Run in its own process, so its work does not share the test's interpreter:

    python -m tests.support.slow_gateway 2.0     # prints its port on the first line, then serves
    python -m tests.support.slow_gateway 10 fast-model slow-model   # "fast-model" at once; GET /models lists both

Each answer is one `chat.completion.chunk` with the content "ok", `[DONE]`, and the chunked
body's end; connections are kept alive. It stops when its standard input closes.
"""

from __future__ import annotations

import asyncio
import json
import sys

CHUNK = ('{"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
         '"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}')
FRAMES = [f"data: {CHUNK}\n\n", "data: [DONE]\n\n"]
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
          + ("".join(f"{len(f):x}\r\n{f}\r\n" for f in FRAMES) + "0\r\n\r\n").encode())


async def serve(delay: float, instant_model: str | None = None, models: tuple[str, ...] = ()) -> None:
    instant = instant_model.encode() if instant_model else None
    listed = [name for name in (instant_model, *models) if name]
    catalog = json.dumps({"object": "list", "data": [{"id": name, "object": "model", "created": 0, "owned_by": "bench"}
                                                     for name in listed]}).encode()
    catalog_answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(catalog), catalog)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length)
                if listed and head.startswith(b"GET ") and b"/models" in head.split(b"\r\n", 1)[0]:
                    writer.write(catalog_answer)  # the model list (only when models were named)
                    await writer.drain()
                    continue
                if not (instant and _model(body) == instant):
                    await asyncio.sleep(delay)
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or this gateway is stopping
        finally:
            writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=1024)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the test closes our standard input
    server.close()


def _model(body: bytes) -> bytes | None:
    try:
        return str(json.loads(body).get("model") or "").encode()
    except (ValueError, AttributeError):
        return None


if __name__ == "__main__":
    asyncio.run(serve(float(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None, tuple(sys.argv[3:])))
