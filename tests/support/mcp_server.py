"""A real MCP server for tests, built with the `mcp` SDK.

`python tests/support/mcp_server.py` speaks stdio; `python tests/support/mcp_server.py PORT`
serves streamable HTTP at `http://127.0.0.1:PORT/mcp`. Tools: `add(a, b)`, `shout(text)`,
`fail(reason)` (always reports an error), `wait(seconds)` (answers "waited" after that long).
"""

import asyncio
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("agents-test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Return the text in upper case."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fail with the reason."""
    raise ToolError(reason)


@server.tool()
async def wait(seconds: float) -> str:
    """Answer "waited" after `seconds` seconds (a slow tool a stop must cancel)."""
    await asyncio.sleep(seconds)
    return "waited"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run()
