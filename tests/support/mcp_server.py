"""A real MCP server for tests, built with the `mcp` SDK.

`python tests/support/mcp_server.py` speaks stdio; `python tests/support/mcp_server.py PORT`
serves streamable HTTP at `http://127.0.0.1:PORT/mcp`. Tools: `add(a, b)`, `shout(text)`,
`fail(reason)` (always reports an error), `wait(seconds, began)` (answers "waited" after that long;
writes its pid to the file `began` when it starts, and "waited" there when it ends).
"""

import asyncio
import os
import sys
from pathlib import Path

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
async def wait(seconds: float, began: str = "") -> str:
    """Answer "waited" after `seconds` seconds (a slow tool a stop must cancel). With `began` (a
    file path): write this process's pid there first and add a line "waited" once the wait is
    over (a test sees the call in flight, and whether it ran to its end)."""
    if began:
        Path(began).write_text(str(os.getpid()))
    await asyncio.sleep(seconds)  # the slow tool itself (the behaviour a stop must cut short), not a wait
    if began:
        with open(began, "a") as marker:
            marker.write("\nwaited")
    return "waited"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run()
