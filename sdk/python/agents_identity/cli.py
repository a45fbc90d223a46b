"""`agents-identity`: the SDK's command line. `agents-identity mcp` runs the user's local stdio MCP
server (`agents_identity.user_mcp`: the Claude Code plugin's server; needs the `mcp` extra)."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> None:
    """Parse `argv` and run the chosen command."""
    parser = argparse.ArgumentParser(prog="agents-identity", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("mcp", help="serve the user's identity tools over stdio MCP (AGENTS_URL, AGENTS_API_KEY, AGENTS_IDENTITY_KEYS)")
    args = parser.parse_args(argv)
    if args.command == "mcp":
        try:
            from agents_identity.user_mcp import serve
        except ImportError as exc:  # the `mcp` SDK is an optional extra
            raise SystemExit(f"agents-identity mcp needs the mcp extra: pip install 'agents-identity[mcp]' ({exc})") from exc
        serve()


if __name__ == "__main__":
    main()
