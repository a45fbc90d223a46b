"""Benchmark: the bare request path and event appends on one daphne process (issue 16).

One daphne process serves the site and, beside it, a minimal ASGI app (`/bench/minimal`: one
200 JSON answer, no Django) — the floor of what daphne and the client cost. Measured in the
same run, on a fresh temporary data directory (SQLite stores, in-memory channel layer):

1. bare request: authenticated `GET /v1/agents` (an org with no agents) against
   `GET /bench/minimal`, interleaved, one keep-alive client: p50/p99 and their ratio;
2. event appends: `POST /v1/agents/sessions/{id}/events` by `--clients` (8) keep-alive clients
   at once, one session each: appends/s and p50/p99, and the same with 1 client;
3. batch append: `--batches` bodies of `--batch-size` (500) events, one client, events/s and
   per-batch p50.

`--profile` adds in-process pyinstrument profiles (Django's sync handler, one thread, no network)
of 300 `GET /v1/agents` and 300 single appends, printed as text: where the milliseconds go.

    .venv/bin/python bench/request_path.py [--requests 500] [--appends 2000] [--clients 8] [--profile]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


async def _minimal(scope, receive, send) -> None:
    while True:  # read the (empty) body
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json"), (b"content-length", b"11")]})
    await send({"type": "http.response.body", "body": b'{"ok":true}'})


def _server_app():
    from server.asgi import application as site

    async def app(scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/bench/minimal":
            return await _minimal(scope, receive, send)
        return await site(scope, receive, send)

    return app


if os.environ.get("BENCH_REQUEST_PATH_SERVER"):  # imported by daphne: `bench.request_path:application`
    application = _server_app()


def serve(data_dir: str, env: dict | None = None, log_name: str = "daphne.log"):
    """Start one daphne serving `application` (the site and `/bench/minimal`) on a free loopback
    port with the Procfile's listen backlog (`AGENTS_LISTEN_BACKLOG`, 2048), its output in
    `data_dir`/`log_name`, `env` added to this process's environment; return `(process, port)`.
    Stop it with `stop`."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_REQUEST_PATH_SERVER": "1", **(env or {})}
    backlog = os.environ.get("AGENTS_LISTEN_BACKLOG", "2048")
    with open(Path(data_dir) / log_name, "wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen([sys.executable, "-m", "daphne", "-e", f"tcp:port={port}:interface=127.0.0.1:backlog={backlog}",
                                    "bench.request_path:application"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, port


def stop(process) -> None:
    """Stop a daphne `serve` started: SIGTERM, then SIGKILL after 15 s."""
    import subprocess

    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def percentile(values: list[float], q: float) -> float:
    """Return the q-quantile (0..1) of `values` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _setup() -> tuple[str, list[str]]:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from sessions.services import session_create
    from tenancy import stores
    from tenancy.services import api_key_create, membership_set, org_create

    org = org_create(slug="bench", name="bench")
    member = membership_set(org=org, username="bench", is_admin=True)
    _, key = api_key_create(org=org, user=member.user)
    with stores.org_context("bench"):
        sessions = [session_create(agent="bench", actor="bench").id for _ in range(64)]
    from django.db import connections

    connections.close_all()
    return key, sessions


def _timed(client, method: str, path: str, **kwargs) -> float:
    import time

    start = time.perf_counter()
    response = client.request(method, path, **kwargs)
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code >= 300:
        raise RuntimeError(f"{method} {path} answered {response.status_code}: {response.text[:300]}")
    return elapsed


def _appends(base: str, key: str, sessions: list[str], *, clients: int, total: int) -> tuple[float, list[float]]:
    import threading
    import time

    import httpx

    per = total // clients
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)

    def work(n: int) -> None:
        mine = []
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            _timed(client, "GET", "/v1/agents")  # connect before the clock starts
            barrier.wait()
            for i in range(per):
                mine.append(_timed(client, "POST", f"/v1/agents/sessions/{sessions[n]}/events", json={"kind": "log", "payload": {"n": i}}))
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return per * clients / (time.perf_counter() - start), latencies


def _profile(key: str, sessions: list[str], n: int) -> None:
    """Profile `n` GET /v1/agents and `n` single appends through Django's sync handler (test client).

    One thread does all the work, so the profile sees the principal, the view and the store
    (under ASGI the same work runs in worker threads the loop only awaits). The middleware
    here is the sync chain, not the ASGI one: read the view and principal shares, not its.
    """
    from django.test import Client
    from pyinstrument import Profiler

    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1")
    cases = [
        ("GET /v1/agents", lambda: client.get("/v1/agents")),
        ("POST …/events (one turn)", lambda: client.post(f"/v1/agents/sessions/{sessions[-2]}/events", b'{"kind":"log","payload":{"n":1}}', content_type="application/json")),
    ]
    for label, call in cases:
        for _ in range(20):
            call()
        profiler = Profiler(interval=0.0002)
        profiler.start()
        for _ in range(n):
            assert call().status_code < 300
        profiler.stop()
        print(f"\n--- pyinstrument: {n} × {label} (in-process, Django's sync handler, no network) ---")
        print(profiler.output_text(unicode=False, color=False, show_all=False, time="percent_of_total"))


def main() -> None:
    import argparse
    import statistics
    import tempfile
    import time

    import httpx

    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    for name in ("REDIS_URL", "DATABASE_URL", "AGENTS_ORG_DATABASE"):
        os.environ.pop(name, None)
    data_dir = tempfile.mkdtemp(prefix="agents-bench-request-")
    os.environ.update({"AGENTS_DATA_DIR": data_dir, "DJANGO_SETTINGS_MODULE": "agents_site.settings"})
    key, sessions = _setup()

    daphne, port = serve(data_dir)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
            for _ in range(300):
                try:
                    client.get("/bench/minimal")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            for _ in range(50):  # warm both paths
                _timed(client, "GET", "/v1/agents")
                _timed(client, "GET", "/bench/minimal")
            bare, minimal = [], []
            for _ in range(args.requests):  # interleaved: both see the same machine
                bare.append(_timed(client, "GET", "/v1/agents"))
                minimal.append(_timed(client, "GET", "/bench/minimal"))

            one_rate, one_lat = _appends(base, key, sessions, clients=1, total=min(400, args.appends))
            many_rate, many_lat = _appends(base, key, sessions[1:], clients=args.clients, total=args.appends)

            batch_lat = []
            body = {"events": [{"kind": "log", "payload": {"n": n, "text": "a turn of a run"}} for n in range(args.batch_size)]}
            _timed(client, "POST", f"/v1/agents/sessions/{sessions[-1]}/events", json=body)
            start = time.perf_counter()
            for _ in range(args.batches):
                batch_lat.append(_timed(client, "POST", f"/v1/agents/sessions/{sessions[-1]}/events", json=body))
            batch_rate = args.batches * args.batch_size / (time.perf_counter() - start)
    finally:
        stop(daphne)

    p50 = statistics.median
    print(f"request_path.py — one daphne process, SQLite stores, in-memory layer ({os.cpu_count()} CPUs)")
    print(f"  GET /bench/minimal (minimal ASGI app, same daphne): p50 {p50(minimal):.2f} ms, p99 {percentile(minimal, 0.99):.2f} ms  (n={len(minimal)})")
    print(f"  GET /v1/agents (API key, empty org):                p50 {p50(bare):.2f} ms, p99 {percentile(bare, 0.99):.2f} ms")
    print(f"  ratio bare / minimal: p50 {p50(bare) / p50(minimal):.2f}×, added p50 {p50(bare) - p50(minimal):.2f} ms")
    print(f"  appends, 1 client: {one_rate:.0f}/s, p50 {p50(one_lat):.2f} ms, p99 {percentile(one_lat, 0.99):.2f} ms")
    print(f"  appends, {args.clients} keep-alive clients: {many_rate:.0f}/s, p50 {p50(many_lat):.2f} ms, p99 {percentile(many_lat, 0.99):.2f} ms")
    print(f"  batch append, {args.batches} × {args.batch_size} events, 1 client: {batch_rate:.0f} events/s, p50 {p50(batch_lat):.1f} ms per batch")
    print(f"  ratio batch / single-append events/s ({args.clients} clients): {batch_rate / many_rate:.1f}×")
    if args.profile:
        _profile(key, sessions, 300)


if __name__ == "__main__":
    main()
