"""Command line of the runner: `python -m runner --server URL --api-key ak_… [options]`, and
`python -m runner verify <build URL or session id> --repo <path or URL>` (`toolkit.verify_build`, the
one-file verifier every build page also offers for download).

Flags fall back to the environment: `AGENTS_SERVER`, `AGENTS_API_KEY`, `RUNNER_LABEL`,
`RUNNER_ALLOW_SHELL`, `AGENTS_TOOL_HTTP_ALLOW` (the hosts `http_get` may fetch, as on the server); inference uses the machine's `INFERENCE_BASE_URL` and `INFERENCE_API_KEY`
(`--model` / `RUNNER_MODEL` replaces the agent's model when this gateway names it otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from pathlib import Path

from runner.daemon import EXIT_FATAL, Config, Daemon
from toolkit.verify_build import main as verify_main
from toolkit.wire import TargetKind

KINDS = tuple(TargetKind)


def parse(argv: list[str] | None = None) -> Config:
    """Return the daemon's `Config` from `argv` and the environment; exit 2 on bad flags."""
    env = os.environ
    parser = argparse.ArgumentParser(prog="python -m runner", description="Take routed agent runs on this machine.")
    parser.add_argument("--server", default=env.get("AGENTS_SERVER", ""), help="the Agents server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--api-key", default=env.get("AGENTS_API_KEY", ""), help="your API key (ak_…) in the machine's org")
    parser.add_argument("--label", default=env.get("RUNNER_LABEL", ""), help="the machine's name in the console (default: host name)")
    parser.add_argument("--kind", default=TargetKind.MACHINE, choices=KINDS)
    parser.add_argument("--host", default="", help="the re-link key (default: this host's name)")
    parser.add_argument("--allow-shell", metavar="DIR", default=env.get("RUNNER_ALLOW_SHELL", ""),
                        help="offer the shell tool, confined to DIR (off by default)")
    parser.add_argument("--allow-http", metavar="HOSTS", default=env.get("AGENTS_TOOL_HTTP_ALLOW", ""),
                        help="offer the http_get tool for these comma-separated hosts (*.example.com for subdomains; off by default)")
    parser.add_argument("--allow-unsandboxed-commands", action="store_true",
                        default=env.get("RUNNER_ALLOW_UNSANDBOXED", "").strip().lower() in {"1", "true", "yes", "on"},
                        help="on a machine without bubblewrap, let coding runs' `run` tool execute commands unconfined "
                             "(the machine then shows \"sandbox\": \"none\")")
    parser.add_argument("--coding-work-dir", metavar="DIR", default=env.get("RUNNER_CODING_WORK_DIR", ""),
                        help="where routed coding runs make their working copies (default: the temp dir)")
    parser.add_argument("--key-dir", metavar="DIR", default="", help="where the claim key file lives (default ~/.config/agents-runner)")
    parser.add_argument("--model", default=env.get("RUNNER_MODEL", ""), help="use this model instead of the agent's")
    parser.add_argument("--heartbeat", type=float, default=30.0, help="seconds between heartbeats (default 30)")
    parser.add_argument("--backoff-max", type=float, default=30.0,
                        help="the longest pause, in seconds, between retries while the server is unreachable or failing (default 30)")
    parser.add_argument("--stop-grace", type=float, default=10.0, help="seconds a run may take to reach its next step after SIGTERM")
    parser.add_argument("--log-level", default=env.get("RUNNER_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    if not args.server or not args.api_key:
        parser.error("--server and --api-key are required (or AGENTS_SERVER / AGENTS_API_KEY)")
    shell_root = None
    if args.allow_shell:
        shell_root = Path(args.allow_shell).expanduser().resolve()
        if not shell_root.is_dir():
            parser.error(f"--allow-shell: {shell_root} is not a directory")
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpx2", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return Config(
        server=args.server.rstrip("/"),
        api_key=args.api_key,
        label=(args.label or socket.gethostname())[:128],
        kind=args.kind,
        host=args.host,
        key_dir=Path(args.key_dir).expanduser() if args.key_dir else None,
        shell_root=shell_root,
        http_allow=tuple(h.strip() for h in args.allow_http.split(",") if h.strip()),
        heartbeat_seconds=max(args.heartbeat, 0.2),
        inference_base_url=env.get("INFERENCE_BASE_URL", "").strip(),
        inference_api_key=env.get("INFERENCE_API_KEY", "").strip(),
        model_override=args.model.strip(),
        stop_grace=max(args.stop_grace, 0.0),
        backoff_initial=min(1.0, max(args.backoff_max, 0.05)),
        backoff_max=max(args.backoff_max, 0.05),
        allow_unsandboxed=bool(args.allow_unsandboxed_commands),
        coding_work_dir=str(Path(args.coding_work_dir).expanduser()) if args.coding_work_dir else None,
    )


def main(argv: list[str] | None = None) -> int:
    """Run the daemon until it stops, or `verify …` (`toolkit.verify_build`); return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["verify"]:
        return verify_main(args[1:], prog="python -m runner verify")
    config = parse(argv)
    try:
        return asyncio.run(Daemon(config).run())
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        logging.getLogger("runner").error("%s", exc)
        return EXIT_FATAL
