"""Every request to a user-named address goes through `toolkit.outbound` (issue 29 item 4).

The source of the server and the runner is read: a module that imports an HTTP client, a
network SDK or opens a socket must be one of the few allowed here, each for a reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# sdk/: the agent SDKs run in an agent developer's own process and call the platform it is configured with.
NOT_PRODUCT = {"tests", "bench", "scripts", "docs", "static", "templates", ".venv", "data", "node_modules", "sdk"}

NETWORK = {"httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3", "aiohttp", "http.client", "urllib.request",
           "websockets", "openai", "mcp", "smtplib", "ftplib", "paramiko", "pycurl"}
SOCKET_CALLS = {"create_connection", "socket", "getaddrinfo", "gethostbyname", "gethostbyname_ex", "create_server", "socketpair"}

ALLOWED = {
    "toolkit/outbound.py": {"httpx2", "httpcore2", "socket"},  # the door itself
    "agents/inference.py": {"httpx", "httpx2", "openai"},  # the model gateway: operator configuration (INFERENCE_BASE_URL), exempt
    "runner/execute.py": {"openai"},  # the machine's own gateway, configured by its owner
    "runner/daemon.py": {"openai"},
    "runner/client.py": {"httpx"},  # the runner's server, configured by the machine's owner
    "toolkit/verify_build.py": {"urllib.request"},  # the one-file build verifier: the build address its user names, read on the user's own machine
    "agents/tools/backends/mcp.py": {"mcp"},
    "toolkit/stopping.py": {"httpcore2", "socket"},  # a run's stop shuts down a connection's socket (issue 25); it opens none
    "tenancy/backups/litestream.py": {"httpx"},
    # the MCP server (issue 54): the SDK's server side answers requests made to us; it opens no connection
    "mcp_server/server.py": {"mcp"},
    "mcp_server/views.py": {"mcp"},
    # `make run`'s supervisor: binds PORT once to check it is free, then polls the daphne it started on loopback
    "server/management/commands/serve.py": {"socket", "urllib.request"},  # the local Litestream daemon's Unix control socket (operator configuration), no address
  # the SDK gets its HTTP client from toolkit.outbound (asserted below)
}


def product_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if not (set(p.relative_to(ROOT).parts) & NOT_PRODUCT) and "migrations" not in p.parts)


def network_uses(path: Path) -> set[str]:
    """Return the network modules `path` imports and `socket` when it calls a connecting socket function."""
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            if node.module == "socket" and {alias.name for alias in node.names} & SOCKET_CALLS:
                found.add("socket")
        for name in names:
            for module in NETWORK:
                if name == module or name.startswith(module + "."):
                    found.add(module)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "socket" and node.attr in SOCKET_CALLS:
            found.add("socket")
    return found


def test_no_outbound_call_escapes_the_door():
    files = product_files()
    assert len(files) > 100
    offenders = {}
    for path in files:
        relative = str(path.relative_to(ROOT))
        extra = network_uses(path) - ALLOWED.get(relative, set())
        if extra:
            offenders[relative] = sorted(extra)
    assert offenders == {}


def test_the_mcp_sdk_is_handed_the_outbound_client():
    source = (ROOT / "agents/tools/backends/mcp.py").read_text()
    assert "outbound.async_client(" in source and "http_client=" in source


def test_the_scan_sees_what_it_must_refuse(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import httpx\nfrom urllib.request import urlopen\nimport socket\nsocket.create_connection(('x', 1))\n")
    assert network_uses(bad) == {"httpx", "urllib.request", "socket"}
    fine = tmp_path / "fine.py"
    fine.write_text("import socket\nsocket.gethostname()\nfrom toolkit import outbound\n")
    assert network_uses(fine) == set()
