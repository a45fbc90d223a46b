"""Benchmark the session event log: appends over HTTP, and live fan-out over SSE.

Part 1 — appends: `--appends` events POSTed to one daphne process by `--clients` concurrent
keep-alive clients; events/s and p50/p99 request latency, next to raw SQLite single-row
inserts (one transaction each, same pragmas: WAL, synchronous=NORMAL) measured in the same run
(the ratio says what the HTTP, auth, validation, credential scan and seq/position allocation
cost on top of the bare write).

Part 2 — fan-out: `--subscribers` SSE streams on one org while `--rate` events/s are appended
for `--seconds`; latency from the moment the append is made (`t0` in its payload) to the
moment each subscriber has the frame, p50/p99 over every (subscriber, event) pair, next to the
same run with one subscriber (the ratio says what 100 readers cost each reader). With
`--redis` the appends are made by a separate writer process through `session_append_event`
(how an executor writes) and reach daphne over Redis; without it they are POSTed to the same
daphne process (the in-memory layer reaches no other process).

    .venv/bin/python bench/events.py                   # in-memory channel layer
    .venv/bin/python bench/events.py --redis redis://127.0.0.1:6379/3

Everything runs on a throwaway data directory; nothing is left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def percentile(values: list[float], q: float) -> float:
    """Return the q-quantile (0..1) of `values` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def cpu_seconds(pid: int) -> float:
    """Return the user + system CPU seconds process `pid` has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_site(data_dir: Path) -> tuple[str, str]:
    """Migrate a fresh site in `data_dir`; return (org slug, API key)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"
    os.environ["AGENTS_DATA_DIR"] = str(data_dir)
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    import django

    django.setup()
    from django.core.management import call_command

    from tenancy.services import api_key_create, membership_set, org_create

    call_command("migrate", verbosity=0, interactive=False)
    org = org_create(slug="bench", name="bench")
    membership = membership_set(org=org, username="bench", password="bench", is_admin=True)
    _, key = api_key_create(org=org, user=membership.user)
    return org.slug, key


def start_daphne(data_dir: Path, extra_env: dict) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agents_site.settings", "AGENTS_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT), **extra_env}
    log = open(data_dir / "daphne.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "server.asgi:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(url + "/v1/agents/openapi.json", timeout=1)
            return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("daphne did not start")


# --- part 1 -------------------------------------------------------------------------------


def raw_sqlite_inserts(data_dir: Path, count: int) -> float:
    """Return single-row inserts per second into a plain SQLite table (one transaction each)."""
    path = data_dir / "raw.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE ev (id TEXT PRIMARY KEY, session_id TEXT, seq INTEGER, kind TEXT, payload TEXT, created_at TEXT)")
    payload = json.dumps({"text": "a turn of the transcript", "n": 0})
    started = time.perf_counter()
    for n in range(count):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO ev VALUES (?, ?, ?, ?, ?, ?)", (f"evt_{n:032x}", "sess_1", n + 1, "message", payload, "2026-01-01T00:00:00Z"))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return count / elapsed


def http_appends(url: str, key: str, session_id: str, count: int, clients: int) -> tuple[float, list[float]]:
    """POST `count` events with `clients` threads; return (events/s, latencies in seconds)."""
    import httpx

    latencies: list[float] = []
    lock = threading.Lock()
    per_client = count // clients

    def worker(index: int) -> None:
        local: list[float] = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
            for n in range(per_client):
                t0 = time.perf_counter()
                response = client.post(f"/v1/agents/sessions/{session_id}/events", json={"kind": "message", "payload": {"text": "a turn of the transcript", "n": n, "client": index}})
                local.append(time.perf_counter() - t0)
                assert response.status_code == 201, response.text
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return per_client * clients / elapsed, latencies


# --- part 2 -------------------------------------------------------------------------------


async def subscriber(host: str, port: int, key: str, stop: asyncio.Event, samples: list[float], opened: list[int], ended: list[int]) -> None:
    """One SSE client on a raw socket: record (arrival − the `t0` the appender put in the payload)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET /v1/agents/sessions/stream HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    buffer = b""
    live = False
    while not stop.is_set():  # cancelled by `fanout` once every delivery is in (no timer per read)
        chunk = await reader.read(65536)
        if not chunk:
            ended.append(1)  # the server ended the stream (a dropped subscriber)
            break
        now = time.time()
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            if not live and b": stream open" in frame:
                live = True
                opened.append(1)  # subscribed: `: stream open` follows the subscription
            marker = frame.find(b'"t0":')
            if marker >= 0:
                end = frame.find(b"}", marker)
                samples.append(now - float(frame[marker + 5 : end].split(b",")[0]))
    writer.close()


WRITER = """
import json, sys, time, django
django.setup()
from server.heap import settle
settle()  # as daphne and qcluster do: the writer stands for a process of ours that appends
from django.db import connections
from tenancy import stores
from sessions.services import session_append_event
slug, session_id, rate, total = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
# Warm up before the timed window: the process's first append opens its store connection, builds
# the bus (its loop thread, the Redis connection) and loads the scanner (≈ 0.5 s) — timed, the
# writer started 100 events behind and its catch-up burst was the run's p99.
with stores.org_context(slug):
    session_append_event(session_id=session_id, kind="log", payload={"warmup": True}, actor="bench-writer")
print("READY", flush=True)
sys.stdin.readline()
start = time.perf_counter()
with stores.org_context(slug):
    for n in range(total):
        delay = start + n / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        session_append_event(session_id=session_id, kind="log", payload={"t0": time.time(), "n": n}, actor="bench-writer")
print("DONE", time.perf_counter() - start, flush=True)
"""


async def _http_writer(url: str, key: str, session_id: str, rate: float, total: int) -> int:
    import httpx

    appended = 0
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60, limits=httpx.Limits(max_connections=32)) as client:

        async def append(n: int) -> None:
            nonlocal appended
            response = await client.post(f"/v1/agents/sessions/{session_id}/events", json={"kind": "log", "payload": {"t0": time.time(), "n": n}})
            assert response.status_code == 201, response.text
            appended += 1

        pending = []
        start = time.perf_counter()
        for n in range(total):
            delay = start + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            pending.append(asyncio.create_task(append(n)))
        await asyncio.gather(*pending)
    return appended


async def _process_writer(env: dict, slug: str, session_id: str, rate: float, total: int) -> int:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, slug, session_id, str(rate), str(total),
        cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )
    assert (await proc.stdout.readline()).startswith(b"READY")
    proc.stdin.write(b"go\n")
    await proc.stdin.drain()
    done = await proc.stdout.readline()
    await proc.wait()
    assert done.startswith(b"DONE"), done
    return total


async def fanout(url: str, key: str, session_id: str, subscribers: int, rate: float, seconds: float, writer: dict | None) -> tuple[list[float], int]:
    """Run `subscribers` SSE clients while `rate` events/s are appended; return (latencies, appended).

    `writer` None: the appends are POSTed to the same daphne process; else they are made by a
    separate writer process through the service (`writer` = its environment, Redis layer).
    """
    host, port = url.removeprefix("http://").split(":")
    samples: list[float] = []
    opened: list[int] = []
    ended: list[int] = []
    stop = asyncio.Event()
    tasks = [asyncio.create_task(subscriber(host, int(port), key, stop, samples, opened, ended)) for _ in range(subscribers)]
    for _ in range(1200):
        if len(opened) >= subscribers:
            break
        await asyncio.sleep(0.05)
    if len(opened) < subscribers:  # a stream opened later starts at the head: it misses what came before
        print(f"  (only {len(opened)} of {subscribers} streams were open when the appends began)")
    total = int(rate * seconds)
    if writer is None:
        appended = await _http_writer(url, key, session_id, rate, total)
    else:
        appended = await _process_writer(writer, writer["BENCH_ORG"], session_id, rate, total)
    expected = appended * subscribers
    for _ in range(600):
        if len(samples) >= expected:
            break
        await asyncio.sleep(0.05)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if ended:
        print(f"  ({len(ended)} stream(s) were dropped by the server while {subscribers} were open)")
    return samples, appended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--redis", default="", help="REDIS_URL for the daphne process (channels-redis layer)")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="agents-bench-events-"))
    proc = None
    try:
        slug, key = setup_site(data_dir)
        extra = {"REDIS_URL": args.redis} if args.redis else {}
        proc, url = start_daphne(data_dir, extra)
        import httpx

        headers = {"Authorization": f"Bearer {key}"}
        session_id = httpx.post(f"{url}/v1/agents/sessions", json={"agent": "bench"}, headers=headers).json()["id"]
        layer = "channels-redis" if args.redis else "in-memory channel layer"
        print(f"# bench/events.py — one daphne process, {layer}, {os.cpu_count()} CPUs")

        http_appends(url, key, session_id, 200, args.clients)  # warm up
        raw = raw_sqlite_inserts(data_dir, args.appends)
        _, single = http_appends(url, key, session_id, 300, 1)
        rate, latencies = http_appends(url, key, session_id, args.appends, args.clients)
        print(f"raw SQLite single-row inserts : {raw:10.0f} /s (baseline)")
        print(f"HTTP appends ({args.clients} clients)     : {rate:10.0f} /s  = {rate / raw:.3f} x baseline")
        print(f"HTTP append latency, 1 client : p50 {percentile(single, 0.5) * 1000:.1f} ms, p99 {percentile(single, 0.99) * 1000:.1f} ms")
        print(f"HTTP append latency, {args.clients} clients: p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms")

        fan_session = httpx.post(f"{url}/v1/agents/sessions", json={"agent": "fanout"}, headers=headers).json()["id"]
        writer = None
        if args.redis:
            writer = {**os.environ, "AGENTS_DATA_DIR": str(data_dir), "REDIS_URL": args.redis, "PYTHONPATH": str(ROOT), "BENCH_ORG": slug}
        how = "a writer process (service + Redis)" if writer else "HTTP POSTs to the same daphne"
        print(f"fan-out appends made by {how}")
        one, one_count = asyncio.run(fanout(url, key, fan_session, 1, args.rate, min(args.seconds, 5), writer))
        cpu_before, wall_before = (cpu_seconds(proc.pid), os.times()), time.perf_counter()
        many, many_count = asyncio.run(fanout(url, key, fan_session, args.subscribers, args.rate, args.seconds, writer))
        wall = time.perf_counter() - wall_before
        mine = os.times()
        daphne_cores = (cpu_seconds(proc.pid) - cpu_before[0]) / wall
        client_cores = (mine.user + mine.system - cpu_before[1].user - cpu_before[1].system) / wall
        writer_cores = (mine.children_user + mine.children_system - cpu_before[1].children_user - cpu_before[1].children_system) / wall
        print(f"fan-out, 1 subscriber         : {one_count} events at {args.rate:.0f}/s, {len(one)} deliveries; "
              f"p50 {percentile(one, 0.5) * 1000:.1f} ms, p99 {percentile(one, 0.99) * 1000:.1f} ms (baseline)")
        print(f"fan-out, {args.subscribers} subscribers       : {many_count} events at {args.rate:.0f}/s, {len(many)} of {many_count * args.subscribers} deliveries; "
              f"p50 {percentile(many, 0.5) * 1000:.1f} ms, p99 {percentile(many, 0.99) * 1000:.1f} ms "
              f"= {percentile(many, 0.99) / percentile(one, 0.99):.2f} x baseline p99")
        print(f"(mean delivery {statistics.mean(many) * 1000:.1f} ms)")
        print(f"CPU during the {args.subscribers}-subscriber fan-out ({wall:.1f} s, {os.cpu_count()} CPUs): daphne {daphne_cores:.2f} cores, "
              f"the {args.subscribers} SSE clients {client_cores:.2f}, the writer process {writer_cores:.2f}, "
              f"machine load {os.getloadavg()[0]:.1f}")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
