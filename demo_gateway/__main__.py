"""`python -m demo_gateway [--host H] [--port P]`: serve the demo gateway until interrupted.

`make demo` starts it beside the server and points `INFERENCE_BASE_URL` at it. It answers the
model `demo` only by rule (echo, `/tool NAME {json}`), never with a model: see `demo_gateway.server`.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from demo_gateway.server import DEMO_MODEL, Upstream


def main(argv: list[str] | None = None) -> int:
    """Parse `argv`, serve until SIGINT/SIGTERM; return the exit code (2 when the port is taken)."""
    parser = argparse.ArgumentParser(prog="python -m demo_gateway", description="The demo OpenAI-compatible gateway (not a model).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args(argv)
    try:
        gateway = Upstream(demo=True).start(host=args.host, port=args.port)
    except OSError as exc:
        print(f"demo gateway: cannot listen on {args.host}:{args.port} ({exc.strerror or exc}).", file=sys.stderr)
        return 2
    print(f"demo gateway (model '{DEMO_MODEL}', echoes; '/tool NAME {{json}}' calls a tool) on {gateway.base_url}", flush=True)
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    gateway.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
