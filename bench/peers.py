"""Benchmark: a run on this platform beside the same run on a peer's server, same upstream, same clients.

`--peer langgraph` (the only peer so far): installs LangGraph's server (`langgraph-cli[inmem]`,
pinned below) into its own venv under `data/bench-peers/` (kept between runs: `--venv` names
it; first install ≈ 1 min), writes a one-node graph that calls the same loopback gateway with
the input as a user message and returns the reply, serves it with `langgraph dev` (the
in-memory runtime, `--n-jobs-per-worker` = the burst) and measures, in interleaved pairs (ours
then theirs, then theirs then ours, …, so drift and the other tenants' load hit both alike):

1. sequential: one request at a time over keep-alive connections — the gateway directly (the
   floor), ours `POST /v1/agents/{ref}/run` on one daphne process, theirs `POST /runs/wait`;
   p50 / p99 of `--requests` interleaved triples;
2. `--clients` (50) concurrent clients, each looping runs for `--seconds` (10): runs/s;
3. `--burst` (500) runs fired at once whose completion takes `--delay` (10) s at the gateway:
   the wall until the last answer (÷ one call's `--delay`), how many answered ok, and the
   peak threads, open descriptors and RSS of each server's process tree (sampled every 0.2 s).

The gateway is `tests/support/slow_gateway.py` in its own process (one event loop): model
`bench-fast` is answered at once (phases 1 and 2), `bench-slow` after `--delay` s (phase 3);
both servers stream the same one-chunk answer. Each figure is printed with its pair's ratio
(ours ÷ theirs, or theirs ÷ ours where smaller is better for us), the load average beside each
phase; the goals of issue 59 item 2 after. The temporary data directory is removed at the end.

    .venv/bin/python bench/peers.py --peer langgraph [--requests 30] [--pairs 2] [--clients 50]
        [--seconds 10] [--burst 500] [--delay 10] [--skip-burst] [--venv data/bench-peers/langgraph]
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

FAST, SLOW = "bench-fast", "bench-slow"
PROMPT = "Summarise the benefits of per-org SQLite files in one sentence."
# What the peer's venv gets, pinned: the versions measured in BENCHMARKS.md.
LANGGRAPH_PINS = ("langgraph-cli[inmem]==0.4.40", "langgraph==1.2.24", "langgraph-api==0.16.7",
                  "langgraph-runtime-inmem==0.36.7", "langgraph-sdk==0.4.14", "httpx==0.28.1")

GRAPH = '''
"""One node: send the input to the loopback gateway's chat completions, return the reply."""
import json
import os
from typing import TypedDict

import httpx
from langgraph.graph import END, START, StateGraph

UPSTREAM = os.environ["BENCH_UPSTREAM"]
# Keep-alive, as the platform's SDK client; room for the whole burst at once (httpx's default is 100).
_client = httpx.AsyncClient(base_url=UPSTREAM, timeout=120, limits=httpx.Limits(max_connections=2000, max_keepalive_connections=2000))


class State(TypedDict, total=False):
    input: str
    model: str
    output: str


async def call_model(state: State) -> dict:
    r = await _client.post("/chat/completions", json={"model": state["model"], "messages": [{"role": "user", "content": state["input"]}]})
    r.raise_for_status()
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        text = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                       for line in r.text.splitlines() if line.startswith("data: {"))
    else:
        text = r.json()["choices"][0]["message"]["content"]
    return {"output": text}


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
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", *LANGGRAPH_PINS], check=True)
        marker.write_text("\n".join(LANGGRAPH_PINS))
    return path / "bin"


def start_gateway(delay: float) -> tuple[subprocess.Popen, str]:
    """Start tests/support/slow_gateway.py (model `FAST` at once, others after `delay` s); return (process, base url)."""
    process = subprocess.Popen([sys.executable, "-m", "tests.support.slow_gateway", str(delay), FAST, SLOW], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}/v1"


def start_langgraph(bin_dir: Path, upstream_url: str, jobs: int) -> tuple[subprocess.Popen, str, Path]:
    """Serve the one-node graph with `langgraph dev` (in-memory); return (process, base url, app dir)."""
    import httpx

    app = Path(tempfile.mkdtemp(prefix="agents-bench-langgraph-"))
    (app / "graph.py").write_text(textwrap.dedent(GRAPH))
    (app / "langgraph.json").write_text('{"graphs": {"agent": "./graph.py:graph"}, "dependencies": ["."]}')
    port = free_port()
    env = {**os.environ, "BENCH_UPSTREAM": upstream_url, "LANGGRAPH_NO_ANALYTICS": "1"}
    process = subprocess.Popen(
        [str(bin_dir / "langgraph"), "dev", "--port", str(port), "--no-browser", "--no-reload", "--server-log-level", "warning",
         "--n-jobs-per-worker", str(jobs)],
        cwd=app, env=env, stdout=subprocess.DEVNULL, stderr=(app / "server.log").open("w"), start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
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


# --- what a server's processes hold ---------------------------------------------------------

def _tree(root: int) -> list[int]:
    """Return `root` and every process descended from it (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def holdings(root: int) -> tuple[int, int, float]:
    """Return (threads, open descriptors, RSS MiB) summed over `root`'s process tree."""
    threads = fds = rss_kib = 0
    for pid in _tree(root):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Threads:"):
                threads += int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss_kib += int(line.split()[1])
    return threads, fds, rss_kib / 1024


class PeakSampler:
    """Sample `holdings(root)` every 0.2 s on a thread until `stop()`; keep the peak of each."""

    def __init__(self, root: int) -> None:
        import threading

        self.root, self.peak, self.done = root, [0, 0, 0.0], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(0.2):
            for i, value in enumerate(holdings(self.root)):
                self.peak[i] = max(self.peak[i], value)

    def stop(self) -> tuple[int, int, float]:
        self.done.set()
        self.thread.join()
        for i, value in enumerate(holdings(self.root)):
            self.peak[i] = max(self.peak[i], value)
        return tuple(self.peak)


# --- the three phases -----------------------------------------------------------------------

def _load() -> float:
    return os.getloadavg()[0]


async def _concurrent(post, clients: int, seconds: float) -> tuple[float, int]:
    """Run `clients` loops of `await post()` for `seconds`; return (ok runs per second, failures)."""
    import asyncio

    ok = failed = 0
    stop_at = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal ok, failed
        while time.perf_counter() < stop_at:
            try:
                if await post():
                    ok += 1
                else:
                    failed += 1
            except Exception:
                failed += 1

    start = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(clients)))
    return ok / (time.perf_counter() - start), failed


async def _burst(post, n: int) -> tuple[float, int]:
    """Fire `n` `post()` at once; return (seconds until the last answered, how many answered ok)."""
    import asyncio

    async def one() -> bool:
        try:
            return await post()
        except Exception:
            return False

    start = time.perf_counter()
    results = await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - start, sum(results)


PLUMBING = ("(events.py", "(base_events.py", "(threading.py", "(<frozen runpy>", "(__main__.py", "(cli.py", "(server.py",
            "(asyncioreactor.py", "(thread.py", "(selector_events.py", "(selectors.py", "(tasks.py")


def top_frames(path: Path, limit: int = 14) -> str:
    """Return the inclusive and self shares of the hottest functions in py-spy's collapsed stacks at `path`."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return "(no profile: py-spy wrote nothing)"
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [frame.split(" (")[0] + " (" + frame.split(" (")[-1].split("/")[-1].split(":")[0] if " (" in frame else frame
                  for frame in stack.split(";")]
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + samples
        own[frames[-1]] = own.get(frames[-1], 0) + samples
    if not total:
        return "(no samples)"
    rows = [f"   {total} GIL samples at 200 Hz; top by self share, then by inclusive share (thread roots left out)"]
    for title, table in (("self", own), ("inclusive", inclusive)):
        ranked = sorted(table.items(), key=lambda item: -item[1])
        if title == "inclusive":  # the loop, the threads and the server's entry frames hold everything: left out
            ranked = [item for item in ranked if not item[0].endswith(PLUMBING)]
        rows += [f"   {title:>9} {count / total:6.1%}  {frame}" for frame, count in ranked[:limit]]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--peer", choices=["langgraph"], required=True)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--pairs", type=int, default=2, help="interleaved pairs of the concurrent and burst phases")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--delay", type=float, default=10.0)
    parser.add_argument("--skip-burst", action="store_true")
    parser.add_argument("--venv", default=str(ROOT / "data" / "bench-peers" / "langgraph"))
    parser.add_argument("--py-spy", default="", help="a py-spy binary: profile our daphne (GIL samples) in the first concurrent phase")
    args = parser.parse_args()

    import asyncio

    import httpx

    from tests.support.live import LiveServer

    load_start = _load()
    bin_dir = langgraph_venv(Path(args.venv))
    gateway, gateway_url = start_gateway(args.delay)
    peer, peer_url, app = start_langgraph(bin_dir, gateway_url, max(args.burst, args.clients))
    _, key = provision()
    server = LiveServer({"INFERENCE_BASE_URL": gateway_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": FAST}).start()
    headers = {"Authorization": f"Bearer {key}"}
    result: dict = {"load": [load_start]}
    try:
        ours_http = httpx.Client(base_url=server.url, headers=headers, timeout=60)
        theirs_http = httpx.Client(base_url=peer_url, timeout=60)
        floor_http = httpx.Client(base_url=gateway_url, timeout=60)
        for name, model in (("bench", FAST), ("slow", SLOW)):
            created = ours_http.post("/v1/agents", json={"name": name, "model": model})
            assert created.status_code == 201, created.text

        def floor():
            response = floor_http.post("/chat/completions", json={"model": FAST, "messages": [{"role": "user", "content": PROMPT}]})
            assert response.status_code == 200

        def ours():
            response = ours_http.post("/v1/agents/bench/run", json={"input": PROMPT})
            assert response.status_code == 200 and response.json()["status"] == "ok", response.text

        def theirs():
            response = theirs_http.post("/runs/wait", json={"assistant_id": "agent", "input": {"input": PROMPT, "model": FAST}})
            assert response.status_code == 200 and response.json().get("output"), response.text

        for fn in (floor, ours, theirs):  # warm-up
            timed(fn, 3)
        result["idle"] = {"ours": holdings(server.proc.pid), "theirs": holdings(peer.pid)}
        base, mine, peer_ms = [], [], []
        for _ in range(args.requests):  # interleaved, so drift hits all alike
            base += timed(floor, 1)
            mine += timed(ours, 1)
            peer_ms += timed(theirs, 1)
        result["sequential"] = (base, mine, peer_ms)
        result["load"].append(_load())

        def poster(kind: str, client: httpx.AsyncClient, model: str):
            if kind == "ours":
                async def post() -> bool:
                    r = await client.post(f"/v1/agents/{'bench' if model == FAST else 'slow'}/run", json={"input": PROMPT})
                    return r.status_code == 200 and r.json().get("status") == "ok"
            else:
                async def post() -> bool:
                    r = await client.post("/runs/wait", json={"assistant_id": "agent", "input": {"input": PROMPT, "model": model}})
                    return r.status_code == 200 and bool(r.json().get("output"))
            return post

        def client_for(kind: str, connections: int) -> httpx.AsyncClient:
            limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
            return httpx.AsyncClient(base_url=server.url if kind == "ours" else peer_url, headers=headers if kind == "ours" else None,
                                     timeout=httpx.Timeout(600, pool=600), limits=limits)

        async def concurrent(kind: str):
            spy = None
            if kind == "ours" and args.py_spy and "profile" not in result:
                result["profile"] = Path(os.environ["AGENTS_DATA_DIR"]) / "ours.collapsed"
                spy = subprocess.Popen([args.py_spy, "record", "--pid", str(server.proc.pid), "--duration", str(int(args.seconds)),
                                        "--rate", "200", "--gil", "--format", "raw", "--output", str(result["profile"])],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            async with client_for(kind, args.clients) as client:
                got = await _concurrent(poster(kind, client, FAST), args.clients, args.seconds)
            if spy is not None:
                spy.wait(timeout=120)
                result["profile_text"] = top_frames(result["profile"])
            return got

        async def burst(kind: str):
            async with client_for(kind, args.burst) as client:
                sampler = PeakSampler(server.proc.pid if kind == "ours" else peer.pid)
                wall, ok = await _burst(poster(kind, client, SLOW), args.burst)
                return wall, ok, sampler.stop()

        result["concurrent"], result["burst"] = [], []
        for pair in range(args.pairs):
            order = ("ours", "theirs") if pair % 2 == 0 else ("theirs", "ours")
            got = {kind: asyncio.run(concurrent(kind)) for kind in order}
            result["concurrent"].append((got["ours"], got["theirs"], _load()))
        if not args.skip_burst:
            for pair in range(args.pairs):
                order = ("ours", "theirs") if pair % 2 == 0 else ("theirs", "ours")
                got = {kind: asyncio.run(burst(kind)) for kind in order}
                result["burst"].append((got["ours"], got["theirs"], _load()))
    finally:
        server.stop()
        os.killpg(peer.pid, signal.SIGTERM)
        try:
            peer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(peer.pid, signal.SIGKILL)
        shutil.rmtree(app, ignore_errors=True)
        gateway.stdin.close()
        gateway.wait(timeout=10)
    shutil.rmtree(os.environ["AGENTS_DATA_DIR"], ignore_errors=True)  # kept after a failure: the daphne log is there
    report(args, result)


def report(args, result: dict) -> None:
    """Print each phase with its pairs' ratios, then the goals of issue 59 item 2."""
    version = LANGGRAPH_PINS[2].split("==")[1]
    loads = " → ".join(f"{value:.1f}" for value in result["load"])
    print(f"peers.py --peer langgraph: ours (one daphne, SQLite) vs LangGraph {version} (langgraph dev, inmem, "
          f"--n-jobs-per-worker {max(args.burst, args.clients)}), {os.cpu_count()} CPUs, load average {loads}\n")
    base, mine, peer_ms = result["sequential"]
    print(f"1. sequential, {args.requests} interleaved triples, one request at a time, the gateway answers at once")
    print(f"   {'server':<44}{'p50':>10}{'p99':>10}")
    for label, values in (("gateway directly (floor)", base), ("ours: POST /v1/agents/{ref}/run", mine),
                          (f"LangGraph {version}: POST /runs/wait", peer_ms)):
        print(f"   {label:<44}{percentile(values, 50):>8.1f}ms{percentile(values, 99):>8.1f}ms")
    seq_ratio = percentile(peer_ms, 50) / percentile(mine, 50)
    print(f"   ours ÷ LangGraph p50: 1/{seq_ratio:.1f}; p99: 1/{percentile(peer_ms, 99) / percentile(mine, 99):.1f}\n")

    print(f"2. {args.clients} concurrent clients, {args.seconds:.0f} s each, runs/s (pairs interleaved)")
    ratios = []
    for (ours_rps, ours_failed), (theirs_rps, theirs_failed), load in result["concurrent"]:
        ratios.append(ours_rps / theirs_rps)
        print(f"   ours {ours_rps:6.1f}/s ({ours_failed} failed)   LangGraph {theirs_rps:6.1f}/s ({theirs_failed} failed)"
              f"   ours ÷ LangGraph {ratios[-1]:.2f}   load {load:.1f}")
    print()
    burst_ratios, burst_rows = [], result["burst"]
    if burst_rows:
        print(f"3. {args.burst} runs at once, each {args.delay:.0f} s at the gateway: wall, ok, peak threads / fds / RSS of the process tree")
        for (o_wall, o_ok, o_hold), (t_wall, t_ok, t_hold), load in burst_rows:
            burst_ratios.append(o_wall / t_wall)
            print(f"   ours {o_wall:6.1f} s = {o_wall / args.delay:.2f}× one call, {o_ok}/{args.burst} ok, "
                  f"{o_hold[0]} threads, {o_hold[1]} fds, {o_hold[2]:.0f} MiB")
            print(f"   LangGraph {t_wall:6.1f} s = {t_wall / args.delay:.2f}× one call, {t_ok}/{args.burst} ok, "
                  f"{t_hold[0]} threads, {t_hold[1]} fds, {t_hold[2]:.0f} MiB   ours ÷ LangGraph {burst_ratios[-1]:.2f}   load {load:.1f}")
        print()
    if result.get("profile_text"):
        print(f"   where our daphne's GIL time went in the first {args.clients}-client phase (py-spy):\n{result['profile_text']}\n")
    idle = result["idle"]
    print(f"   idle after warm-up: ours {idle['ours'][0]} threads, {idle['ours'][1]} fds, {idle['ours'][2]:.0f} MiB; "
          f"LangGraph {idle['theirs'][0]} threads, {idle['theirs'][1]} fds, {idle['theirs'][2]:.0f} MiB\n")

    def verdict(met: bool) -> str:
        return "met" if met else "MISSED"

    print("goals (issue 59 item 2), each in this run:")
    print(f"   sequential p50 ≤ 1/20 of LangGraph's: 1/{seq_ratio:.1f} — {verdict(seq_ratio >= 20)}")
    print(f"   50-concurrent runs/s ours ÷ LangGraph ≥ 1.2: {', '.join(f'{r:.2f}' for r in ratios)} — {verdict(min(ratios) >= 1.2)}")
    if burst_rows:
        all_ok = all(o[1] == args.burst for o, _, _ in burst_rows)
        threads = max(o[2][0] for o, _, _ in burst_rows)
        print(f"   {args.burst} slow runs wall ours ÷ LangGraph ≤ 0.9: {', '.join(f'{r:.2f}' for r in burst_ratios)} — "
              f"{verdict(max(burst_ratios) <= 0.9)}; all ok: {verdict(all_ok)}; threads ≤ 32: {threads} — {verdict(threads <= 32)}")


if __name__ == "__main__":
    main()
