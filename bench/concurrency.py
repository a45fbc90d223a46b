"""Benchmark: N simultaneous slow model calls on one daphne process (issue 26 item 1).

Real parts: one daphne process (`tests/support/live.py`), the loopback OpenAI-compatible upstream
(`tests/support/upstream.py`) streaming a reply whose first word comes after `--first-token`
seconds and whose last after `--reply-seconds`, and — with `--stores postgres` — the PostgreSQL
server on 127.0.0.1:5432 and Redis on :6379 with the default pools (the README's scale-out set-up).

For each kind (`sync`: `POST /v1/agents/bench/run`; `chat`: `POST /v1/agents/chat` streamed;
`openai`: the OpenAI-compatible endpoint streamed), `--n` requests are fired at once. Printed:
how many succeeded (200 and, for streams, a final frame without `error`), the wall time ÷ one
completion's (the baseline, measured against the upstream in the same run), time to first token
p99 (streams) − the gateway's, and what the server process held while they waited: peak threads,
peak RSS over idle, peak open files, the p99 of an authenticated `GET /v1/agents` timed during the
load (every 0.5 s, from a process of its own), and — on PostgreSQL — the peak number of the server
process's connections, matched by port (all, and the most on one database, to hold against the
pools: 10 default, 4 per org; the bench's own are not counted), how many were
idle in a transaction at one sample (a step between two statements of its transaction, waiting
for the CPU) and how many had been idle in a transaction for over a second (a connection held
while something else is awaited: a model's reply takes seconds). After the load: RSS and open
files again. "Idle" is the process after a warm-up burst of 20 quick completions of the kind
(its bounded pools filled), so "after" is what the load left beyond a server that has served.
Also printed: when the upstream got the server's model call, seconds after the requests were
fired (p50 / p99: how long the server's start burst took to reach the model), and the cores the
server and this process used over the wall (this process runs the clients and the in-process
upstream; the GET prober is apart).

    .venv/bin/python bench/concurrency.py [--n 500] [--stores sqlite|postgres] [--kinds sync,chat,openai]
                                          [--reply-seconds 30] [--first-token 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "bench-model"
WORDS = 50


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(q / 100 * len(values)))]


def configure(stores: str) -> str:
    """Set this process's (and so the server's) environment for `stores`; return the run's tag."""
    tag = "bc" + uuid.uuid4().hex[:8]
    for name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL",
                 "AGENTS_ORG_DATABASE", "CLOUD_AGENT_FEE_CENTS", "AGENTS_CHAT_FEE_CENTS", "AGENTS_OPENAI_FEE_CENTS",
                 "OTEL_EXPORTER_OTLP_ENDPOINT"):
        os.environ.pop(name, None)
    os.environ["AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="agents-bench-")
    os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"
    if stores == "postgres":
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"CREATE DATABASE {tag}_default"], check=True)
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{tag}_default"
        os.environ["REDIS_URL"] = "redis://127.0.0.1:6379/0"
        os.environ["AGENTS_ORG_DATABASE"] = "postgres"
        os.environ["AGENTS_ORG_DATABASE_PREFIX"] = f"{tag}_org_"
    return tag


def drop_databases(tag: str) -> None:
    """Drop the PostgreSQL databases this run created."""
    names = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc",
                            f"SELECT datname FROM pg_database WHERE datname LIKE '{tag}%'"], capture_output=True, text=True).stdout.split()
    for name in names:
        subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False)


class Sampler:
    """Samples the server process (threads, RSS, open files) and, on PostgreSQL, its connections."""

    def __init__(self, pid: int, tag: str | None) -> None:
        self.pid, self.tag = pid, tag
        self.threads = self.rss_kib = self.files = self.pg_connections = self.pg_idle_in_transaction = 0
        self.pg_per_database = self.pg_idle_in_transaction_1s = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def snapshot(self) -> tuple[int, int, int]:
        """Return (threads, RSS KiB, open files) of the server now."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        files = len(os.listdir(f"/proc/{self.pid}/fd"))
        return int(fields["Threads"].strip()), int(fields["VmRSS"].split()[0]), files

    def _server_ports(self) -> list[int]:
        """Return the local ports of the server process's connections to PostgreSQL (from `ss`)."""
        out = subprocess.run(["ss", "-tnpH", "dport = :5432"], capture_output=True, text=True).stdout
        return [int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if f"pid={self.pid}," in line]

    def _pg(self) -> tuple[int, int, int, int]:
        """Return the server process's PostgreSQL connections: (all, the most on one database, idle
        in transaction now, … for over 1 s). The bench's own connections are not counted."""
        ports = self._server_ports()
        if not ports:
            return 0, 0, 0, 0
        out = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc",
                              "SELECT datname, count(*), count(*) FILTER (WHERE state = 'idle in transaction'), "
                              "count(*) FILTER (WHERE state = 'idle in transaction' AND now() - state_change > interval '1 second') "
                              f"FROM pg_stat_activity WHERE datname LIKE '{self.tag}%' "
                              f"AND client_port IN ({','.join(map(str, ports))}) GROUP BY datname"],
                             capture_output=True, text=True).stdout.split()
        rows = [[int(x) for x in line.split("|")[1:]] for line in out if "|" in line]
        return (sum(r[0] for r in rows), max((r[0] for r in rows), default=0), sum(r[1] for r in rows), sum(r[2] for r in rows))

    def _run(self) -> None:
        while not self._stop.is_set():
            threads, rss, files = self.snapshot()
            self.threads, self.rss_kib, self.files = max(self.threads, threads), max(self.rss_kib, rss), max(self.files, files)
            if self.tag:
                total, per_database, idle_tx, idle_tx_1s = self._pg()
                self.pg_connections = max(self.pg_connections, total)
                self.pg_per_database = max(self.pg_per_database, per_database)
                self.pg_idle_in_transaction = max(self.pg_idle_in_transaction, idle_tx)
                self.pg_idle_in_transaction_1s = max(self.pg_idle_in_transaction_1s, idle_tx_1s)
            self._stop.wait(0.2)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


async def one(client, kind: str, first_token: list[float], failures: list[str]) -> None:
    """Make one request of `kind`; record its time to first token (streams) or a failure."""
    started = time.perf_counter()
    user = [{"role": "user", "content": "Why one file per org?"}]
    try:
        if kind == "sync":
            response = await client.post("/v1/agents/bench/run", json={"input": "Why one file per org?"})
            if response.status_code != 200:
                failures.append(f"{response.status_code} {response.text[:120]}")
            return
        url, body = (("/v1/agents/chat", {"agent": "bench", "messages": user, "stream": True}) if kind == "chat"
                     else ("/v1/agents/openai/v1/chat/completions", {"model": "bench", "messages": user, "stream": True}))
        got, event, last = None, None, ""
        async with client.stream("POST", url, json=body) as response:
            if response.status_code != 200:
                failures.append(f"{response.status_code} {(await response.aread())[:120]!r}")
                return
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                    last = event
                elif line.startswith("data:") and got is None:
                    data = line[5:].strip()
                    if kind == "chat" and event == "delta":
                        got = time.perf_counter() - started
                    elif kind == "openai" and data != "[DONE]" and ((json.loads(data).get("choices") or [{}])[0].get("delta") or {}).get("content"):
                        got = time.perf_counter() - started
        if last == "error" or got is None:
            failures.append(f"stream ended with {last or 'no frame'}")
        else:
            first_token.append(got)
    except Exception as exc:  # a refused or broken connection is a failure, not a crash of the bench
        failures.append(f"{type(exc).__name__}: {exc}"[:160])


def probe_list(url: str, key: str) -> None:
    """Time an authenticated `GET /v1/agents` every 0.5 s until stdin closes; print the timings
    (seconds, `inf` for a failure) as one JSON list. Runs in a process of its own (`--probe`), so
    a timing is the server's answer, not a wait on the bench client's busy event loop."""
    import httpx

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    timings: list[float] = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300) as client:
        while not stop.is_set():
            started = time.perf_counter()
            try:
                ok = client.get("/v1/agents").status_code == 200
            except httpx.HTTPError:
                ok = False
            timings.append(time.perf_counter() - started if ok else float("inf"))
            stop.wait(0.5)
    print(json.dumps([t if t != float("inf") else None for t in timings]))


async def load(url: str, key: str, kind: str, n: int) -> tuple[float, float, list[float], list[str], list[float]]:
    """Fire `n` requests of `kind` at once; return (when they were fired, `time.perf_counter()`;
    wall seconds; first-token seconds; failures; `GET /v1/agents` seconds, `inf` for a failure)."""
    import httpx

    limits = httpx.Limits(max_connections=n + 8, max_keepalive_connections=n + 8)
    headers = {"Authorization": f"Bearer {key}"}
    prober = subprocess.Popen([sys.executable, __file__, "--probe", url, key], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300, limits=limits) as client:
        first_token: list[float] = []
        failures: list[str] = []
        started = time.perf_counter()
        await asyncio.gather(*(one(client, kind, first_token, failures) for _ in range(n)))
        wall = time.perf_counter() - started
    out, _ = prober.communicate("")
    if prober.returncode != 0:
        raise RuntimeError(f"the GET prober failed (exit {prober.returncode}); its error is above")
    timings = [float("inf") if t is None else t for t in json.loads(out)]
    return started, wall, first_token, failures, timings


def cpu_seconds(pid: int) -> float:
    """Return the CPU seconds (user + system) process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


WARM_UP = 20  # quick completions of a kind served before its idle figures are taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--stores", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--kinds", default="sync,chat,openai")
    parser.add_argument("--reply-seconds", type=float, default=30.0)
    parser.add_argument("--first-token", type=float, default=5.0)
    parser.add_argument("--probe", nargs=2, metavar=("URL", "KEY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe_list(*args.probe)
        return
    import bench.run_overhead  # noqa: F401  (its import resets the environment: configure after it)

    tag = configure(args.stores)

    from http.server import ThreadingHTTPServer

    ThreadingHTTPServer.request_queue_size = 4096  # the upstream must not be what drops connections

    import httpx

    from bench.run_overhead import provision
    from tests.support.live import LiveServer
    from tests.support.upstream import Reply, Upstream

    upstream = Upstream().start()
    upstream.models = [MODEL]
    pieces = [("w " if i else "w") for i in range(WORDS)]
    reply_content = "".join(pieces)
    chunk_delay = max(args.reply_seconds - args.first_token, 0) / WORDS

    def script(count: int) -> None:
        upstream.script(*[Reply(content=reply_content, chunks=pieces, first_chunk_delay=args.first_token,
                                chunk_delay=chunk_delay) for _ in range(count)])

    _, key = provision()
    env = {"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": MODEL,
           "AGENTS_RUN_DEADLINE_SECONDS": str(max(600, args.reply_seconds * 4)), "AGENTS_LISTEN_BACKLOG": "4096"}
    server = LiveServer(env).start()
    rows = []
    try:
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=300)
        assert http.post("/v1/agents", json={"name": "bench", "model": MODEL}).status_code == 201
        # Baseline: one completion straight from the upstream (the same reply).
        script(1)
        started = time.perf_counter()
        with httpx.Client(base_url=upstream.base_url, timeout=300) as direct:
            with direct.stream("POST", "/chat/completions", json={"model": MODEL, "stream": True,
                                                                   "messages": [{"role": "user", "content": "hi"}]}) as response:
                for _ in response.iter_lines():
                    pass
        one_call = time.perf_counter() - started
        sampler_pid = server.proc.pid
        for kind in [k.strip() for k in args.kinds.split(",") if k.strip()]:
            # Warm: a burst of WARM_UP quick completions of the kind fills the process's bounded pools
            # (request and step threads, their store connections, the gateway's kept connections),
            # so "idle" is a server that has served, and "after" shows what the load left beyond that.
            upstream.script(*[Reply(content="w", chunks=["w"]) for _ in range(WARM_UP)])
            asyncio.run(load(server.url, key, kind, WARM_UP))
            time.sleep(2)
            idle_threads, idle_rss, idle_files = Sampler(sampler_pid, None).snapshot()
            script(args.n)
            arrivals_before = len(upstream.arrivals)
            cpu_before = (cpu_seconds(sampler_pid), cpu_seconds(os.getpid()))
            with Sampler(sampler_pid, tag if args.stores == "postgres" else None) as sampler:
                fired, wall, first_token, failures, timings = asyncio.run(load(server.url, key, kind, args.n))
            cores = ((cpu_seconds(sampler_pid) - cpu_before[0]) / wall, (cpu_seconds(os.getpid()) - cpu_before[1]) / wall)
            reached = [at - fired for at in upstream.arrivals[arrivals_before:]]
            time.sleep(5)
            _, after_rss, after_files = Sampler(sampler_pid, None).snapshot()
            rows.append((kind, args.n - len(failures), wall, first_token, failures, timings, sampler,
                         (idle_threads, idle_rss, idle_files), (after_rss, after_files), reached, cores))
    finally:
        server.stop()
        upstream.stop()
        if args.stores == "postgres":
            drop_databases(tag)

    print(f"{args.n} simultaneous completions per kind on one daphne process, stores: {args.stores}, {os.cpu_count()} CPUs, "
          f"load average at the end {os.getloadavg()[0]:.1f}; reply {args.reply_seconds:.0f} s, first token at {args.first_token:.0f} s; "
          f"one completion straight from the upstream (baseline): {one_call:.1f} s\n")
    head = (f"{'kind':<8}{'ok':>6}{'wall÷one':>10}{'TTFT p99−gw':>13}{'threads':>9}{'RSS+MiB':>9}{'files':>7}"
            f"{'GET p99':>10}{'RSS after':>11}{'files after':>12}{'upstream got p50/p99':>22}{'cores srv/bench+up':>20}")
    if args.stores == "postgres":
        head += f"{'pg conns':>10}{'one db':>8}{'idle-in-tx':>11}{'>1 s':>6}"
    print(head)
    for kind, ok, wall, first_token, failures, timings, sampler, idle, after, reached, cores in rows:
        ttft = percentile(first_token, 99) - args.first_token if first_token else float("nan")
        get = percentile(timings, 99)
        line = (f"{kind:<8}{ok:>6}{wall / one_call:>9.2f}x{ttft:>12.2f}s{sampler.threads:>9}{(sampler.rss_kib - idle[1]) / 1024:>9.0f}"
                f"{sampler.files:>7}{get * 1000:>8.0f}ms{(after[0] - idle[1]) / 1024:>+10.0f}M{after[1] - idle[2]:>+12}"
                f"{percentile(reached, 50):>11.2f}/{percentile(reached, 99):.2f}s{cores[0]:>14.2f}/{cores[1]:.2f}")
        if args.stores == "postgres":
            line += (f"{sampler.pg_connections:>10}{sampler.pg_per_database:>8}{sampler.pg_idle_in_transaction:>11}"
                     f"{sampler.pg_idle_in_transaction_1s:>6}")
        print(line)
        if failures:
            print(f"         failures, first 3: {failures[:3]}")


if __name__ == "__main__":
    main()
