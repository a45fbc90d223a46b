"""Benchmark: a run on this platform beside the same run on a peer's server, same upstream, same client.

`--peer langgraph` (the only peer so far): installs LangGraph's server (`langgraph-cli[inmem]`,
pinned below) into its own venv under the bench's temp dir (kept between runs: `--venv` names
it; first install ≈ 25 s), writes a one-node graph that calls the same loopback upstream
(tests/support/upstream.py) with the input as a user message and returns the reply, serves it
with `langgraph dev` (the in-memory runtime), and measures, interleaved, one request at a time
over keep-alive connections (httpx):

* upstream: `POST {upstream}/chat/completions` directly (the floor both sit on);
* ours:     `POST /v1/agents/{ref}/run` on one daphne process — auth, the balance gate, the run
            row and its session, the same upstream call, the record, the debit;
* theirs:   `POST /runs/wait` (a stateless run of the graph, waiting for its output).

The upstream answers at once, so every millisecond above the floor is the server's own.

    .venv/bin/python bench/peers.py --peer langgraph [--requests 30] [--venv /tmp/agents-bench-peers/langgraph]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

for _name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL",
              "AGENTS_ORG_DATABASE", "CLOUD_AGENT_FEE_CENTS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
    os.environ.pop(_name, None)
os.environ["AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="agents-bench-")
os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"

from bench.run_overhead import percentile, provision, timed  # noqa: E402

MODEL = "bench-model"
PROMPT = "Summarise the benefits of per-org SQLite files in one sentence."
# What the peer's venv gets, pinned: the versions measured in BENCHMARKS.md.
LANGGRAPH_PINS = ("langgraph-cli[inmem]==0.4.40", "langgraph==1.2.24", "langgraph-api==0.16.7",
                  "langgraph-runtime-inmem==0.36.7", "langgraph-sdk==0.4.14", "httpx==0.28.1")

GRAPH = '''
"""One node: send the input to the loopback upstream's chat completions, return the reply."""
import os
from typing import TypedDict

import httpx
from langgraph.graph import END, START, StateGraph

UPSTREAM = os.environ["BENCH_UPSTREAM"]
MODEL = os.environ["BENCH_MODEL"]
_client = httpx.AsyncClient(base_url=UPSTREAM, timeout=60)  # keep-alive, as the platform's SDK client


class State(TypedDict, total=False):
    input: str
    output: str


async def call_model(state: State) -> dict:
    r = await _client.post("/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": state["input"]}]})
    r.raise_for_status()
    return {"output": r.json()["choices"][0]["message"]["content"]}


builder = StateGraph(State)
builder.add_node("call_model", call_model)
builder.add_edge(START, "call_model")
builder.add_edge("call_model", END)
graph = builder.compile()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def langgraph_venv(path: Path) -> Path:
    """Return the peer venv's bin dir, creating the venv and installing the pins when absent."""
    marker = path / ".installed"
    if not marker.exists() or marker.read_text() != "\n".join(LANGGRAPH_PINS):
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", *LANGGRAPH_PINS], check=True)
        marker.write_text("\n".join(LANGGRAPH_PINS))
    return path / "bin"


def start_langgraph(bin_dir: Path, upstream_url: str) -> tuple[subprocess.Popen, str, Path]:
    """Serve the one-node graph with `langgraph dev` (in-memory); return (process, base url, app dir)."""
    import httpx

    app = Path(tempfile.mkdtemp(prefix="agents-bench-langgraph-"))
    (app / "graph.py").write_text(textwrap.dedent(GRAPH))
    (app / "langgraph.json").write_text('{"graphs": {"agent": "./graph.py:graph"}, "dependencies": ["."]}')
    port = free_port()
    env = {**os.environ, "BENCH_UPSTREAM": upstream_url, "BENCH_MODEL": MODEL, "LANGGRAPH_NO_ANALYTICS": "1"}
    process = subprocess.Popen(
        [str(bin_dir / "langgraph"), "dev", "--port", str(port), "--no-browser", "--no-reload", "--server-log-level", "warning"],
        cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=(app / "server.log").open("w"), start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/ok", timeout=2).status_code == 200:
                return process, url, app
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.5)
    process.kill()
    raise SystemExit(f"langgraph dev did not start; see {app / 'server.log'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", choices=["langgraph"], required=True)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--venv", default=str(Path(tempfile.gettempdir()) / "agents-bench-peers" / "langgraph"))
    args = parser.parse_args()

    import httpx

    from tests.support.live import LiveServer
    from tests.support.upstream import Upstream

    upstream = Upstream().start()
    upstream.models = [MODEL]
    bin_dir = langgraph_venv(Path(args.venv))
    peer, peer_url, app = start_langgraph(bin_dir, upstream.base_url)
    _, key = provision()
    server = LiveServer({"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": MODEL}).start()
    try:
        ours_http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        theirs_http = httpx.Client(base_url=peer_url, timeout=60)
        floor_http = httpx.Client(base_url=upstream.base_url, timeout=60)
        assert ours_http.post("/v1/agents", json={"name": "bench", "model": MODEL}).status_code == 201

        def floor():
            response = floor_http.post("/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]})
            assert response.status_code == 200

        def ours():
            response = ours_http.post("/v1/agents/bench/run", json={"input": PROMPT})
            assert response.status_code == 200 and response.json()["status"] == "ok", response.text

        def theirs():
            response = theirs_http.post("/runs/wait", json={"assistant_id": "agent", "input": {"input": PROMPT}})
            assert response.status_code == 200 and response.json().get("output"), response.text

        for fn in (floor, ours, theirs):  # warm-up
            timed(fn, 3)
        base, mine, peer_ms = [], [], []
        for _ in range(args.requests):  # interleaved, so drift hits all alike
            base += timed(floor, 1)
            mine += timed(ours, 1)
            peer_ms += timed(theirs, 1)
    finally:
        server.stop()
        os.killpg(peer.pid, signal.SIGTERM)
        try:
            peer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(peer.pid, signal.SIGKILL)
        shutil.rmtree(app, ignore_errors=True)
        upstream.stop()

    print(f"One run each, {args.requests} interleaved, one request at a time, {os.cpu_count()} CPUs; upstream answers at once\n")
    print(f"{'server':<46}{'p50':>10}{'p99':>10}{'above floor p50':>17}")
    f50 = percentile(base, 50)
    for label, values in (("upstream directly (floor)", base), ("ours: POST /v1/agents/{ref}/run (daphne)", mine),
                          (f"LangGraph {LANGGRAPH_PINS[2].split('==')[1]}: POST /runs/wait (inmem)", peer_ms)):
        p50, p99 = percentile(values, 50), percentile(values, 99)
        print(f"{label:<46}{p50:>8.1f}ms{p99:>8.1f}ms{p50 - f50:>15.1f}ms")
    ratio = percentile(peer_ms, 50) / percentile(mine, 50)
    print(f"\nours ÷ theirs p50: 1/{ratio:.0f} (goal ≤ 1/50)")


if __name__ == "__main__":
    main()
