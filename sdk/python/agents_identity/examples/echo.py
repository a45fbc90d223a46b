"""The echo agent: "hello" → "echo: hello", sealed to the user and signed by the agent.

    python -m agents_identity.examples.echo agent.json --mode websocket
    python -m agents_identity.examples.echo agent.json --mode webhook --port 8787

`agent.json` is the file the console offers when it creates the agent (or set AGENT_CREDENTIALS /
the AGENT_* variables, see `agents_identity.keys`). `--register` registers the file's public keys
first (after a token rotation).
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from agents_identity.agent import IdentityAgent, IncomingMessage
from agents_identity.keys import Credentials


def echo(message: IncomingMessage) -> str:
    """Answer a text message with the same text, prefixed."""
    return f"echo: {message.text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents_identity.examples.echo", description="The echo identity agent.")
    parser.add_argument("credentials", nargs="?", help="agent.json (default: the AGENT_* environment)")
    parser.add_argument("--mode", choices=["websocket", "webhook"], help="default: webhook when the credentials hold a webhook secret")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8787)
    parser.add_argument("--register", action="store_true", help="register the credentials' public keys first")
    args = parser.parse_args(argv)
    credentials = Credentials.load(args.credentials) if args.credentials else Credentials.from_env()
    mode = args.mode or ("webhook" if credentials.webhook_secret else "websocket")
    agent = IdentityAgent(credentials, on_message=echo, log=lambda line: print(f"[echo {credentials.agent_id}] {line}", flush=True))
    if args.register:
        agent.register_keys()
    try:
        if mode == "webhook":
            agent.serve_webhooks(host=args.host, port=args.port)
        else:
            asyncio.run(agent.run_websocket())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
