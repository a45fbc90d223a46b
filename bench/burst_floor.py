"""Benchmark: what N requests fired at once cost one daphne process before any run starts (issue 26).

Issue 26 asks that 500 simultaneous streamed completions on one daphne process get their first
token within the gateway's time + 2 s (p99), and that an authenticated `GET /v1/agents` answer
within 100 ms (p99) during that load. Both are bounded by how long one process takes to get
through 500 requests' own CPU. This bench measures that floor with requests far simpler than a
run start, on the same daphne (`bench.request_path`'s server: the site plus `/bench/minimal`, a
minimal ASGI app with no Django), SQLite stores, the in-memory channel layer:

1. `GET /bench/minimal` — daphne, Twisted and the client alone (the baseline);
2. `GET /v1/agents` without a key — Django's handler and the whole middleware chain, refused
   403 (the project answers every credential failure 403), no store read;
3. `GET /v1/agents` with an API key — the above plus the key's lookup, Ninja and one list read
   of an empty org (the issue's probe);
4. `POST /v1/agents/sessions/{id}/events` — one event appended (a write, as every run start
   makes several).

Each kind: `--n` requests fired at once by a light asyncio client (one connection each, as that
many separate clients would; it runs on the same machine, so the wall and the latencies include
its share of the CPU, while the server's CPU is read apart), `--rounds` times after a warm-up of
50. Printed per kind, median of the rounds: the wall time until the last answer, p50 and p99
latency, the server's CPU per request (from `/proc`), and the wall ÷ the baseline's; the load
average before and after. The temporary data directory is removed at the end.

`--cache-pairs N` measures instead the API-key principal cache (issue 59): two daphnes side by
side, one with `AGENTS_API_KEY_CACHE_SECONDS=0` (every request reads the key: before) and one
with the default (after); N interleaved pairs (the order flips each pair), each pair a
`/bench/minimal` burst then an authenticated `GET /v1/agents` burst on each daphne. Printed per
pair: each daphne's server CPU per request for both kinds and their ratio (GET ÷ minimal, the
same daphne in the same moment), then after ÷ before of the GET's CPU; medians last.

    .venv/bin/python bench/burst_floor.py [--n 500] [--rounds 3] [--cache-pairs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _one(port: int, method: str, path: str, key: str | None, body: dict | None) -> tuple[float, int]:
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    writer.write(head.encode() + data)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return time.perf_counter() - start, int(answer.split(b" ", 2)[1])


async def _burst(port: int, n: int, method: str, paths: list[str], key: str | None, body: dict | None, expect: int) -> list[float]:
    results = await asyncio.gather(*(_one(port, method, paths[i % len(paths)], key, body) for i in range(n)))
    statuses = {status for _, status in results}
    if statuses != {expect}:
        raise SystemExit(f"{method} {paths[0]}: expected {expect} for all, got {sorted(statuses)}")
    return [seconds for seconds, _ in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache-pairs", type=int, default=0, help="compare the API-key cache off/on instead (see above)")
    args = parser.parse_args()

    for name in ("REDIS_URL", "DATABASE_URL", "AGENTS_ORG_DATABASE"):
        os.environ.pop(name, None)
    data_dir = tempfile.mkdtemp(prefix="agents-bench-floor-")
    os.environ.update({"AGENTS_DATA_DIR": data_dir, "DJANGO_SETTINGS_MODULE": "agents_site.settings"})
    from bench.request_path import _setup, serve, stop

    daphne = None
    load_before = os.getloadavg()[0]
    if args.cache_pairs:
        return _cache_pairs(args, data_dir, load_before)
    try:
        key, sessions = _setup()
        daphne, port = serve(data_dir)  # the Procfile's listen backlog
        rows = _measure(args, daphne, port, key, sessions)
    finally:
        if daphne is not None:
            stop(daphne)
        shutil.rmtree(data_dir, ignore_errors=True)
    _print(args, rows, load_before)


def _listening(port: int) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("daphne did not listen; see its log") from None
            time.sleep(0.1)


def _cpu_per_request(daphne, port: int, n: int, path: str, key: str | None, expect: int) -> float:
    cpu = _cpu_seconds(daphne.pid)
    asyncio.run(_burst(port, n, "GET", [path], key, None, expect))
    return (_cpu_seconds(daphne.pid) - cpu) / n


def _cache_pairs(args, data_dir: str, load_before: float) -> None:
    """Before/after of the API-key cache in interleaved pairs on two daphnes (see module doc)."""
    from bench.request_path import _setup, serve, stop

    servers = {}
    try:
        key, _ = _setup()
        for label, seconds in (("before", "0"), ("after", "5")):
            servers[label] = serve(data_dir, {"AGENTS_API_KEY_CACHE_SECONDS": seconds}, f"daphne-{label}.log")
        for daphne, port in servers.values():
            _listening(port)
            for path, auth, expect in (("/bench/minimal", None, 200), ("/v1/agents", key, 200)):
                asyncio.run(_burst(port, 50, "GET", [path], auth, None, expect))  # warm-up
        pairs = []
        for pair in range(args.cache_pairs):
            order = ("before", "after") if pair % 2 == 0 else ("after", "before")
            row = {}
            for label in order:
                daphne, port = servers[label]
                minimal = _cpu_per_request(daphne, port, args.n, "/bench/minimal", None, 200)
                keyed = _cpu_per_request(daphne, port, args.n, "/v1/agents", key, 200)
                row[label] = (minimal, keyed)
            pairs.append((row, os.getloadavg()[0]))
    finally:
        for daphne, _ in servers.values():
            stop(daphne)
        shutil.rmtree(data_dir, ignore_errors=True)
    print(f"burst_floor.py --cache-pairs {args.cache_pairs}: {args.n} requests at once per burst, two daphnes "
          f"(AGENTS_API_KEY_CACHE_SECONDS=0 before, 5 after), SQLite, {os.cpu_count()} CPUs, load average {load_before:.1f} → "
          f"{os.getloadavg()[0]:.1f}; server CPU per request")
    print(f"{'pair':<6}{'before: minimal':>17}{'GET key':>10}{'ratio':>8}{'after: minimal':>17}{'GET key':>10}{'ratio':>8}"
          f"{'GET after÷before':>18}{'load':>7}")
    ratios_before, ratios_after, gains = [], [], []
    for i, (row, load) in enumerate(pairs, 1):
        (bm, bk), (am, ak) = row["before"], row["after"]
        ratios_before.append(bk / bm)
        ratios_after.append(ak / am)
        gains.append(ak / bk)
        print(f"{i:<6}{bm * 1000:>14.2f} ms{bk * 1000:>7.2f} ms{bk / bm:>7.1f}×{am * 1000:>14.2f} ms{ak * 1000:>7.2f} ms"
              f"{ak / am:>7.1f}×{ak / bk:>17.2f}{load:>7.1f}")
    med = statistics.median
    print(f"median: GET ÷ minimal before {med(ratios_before):.1f}×, after {med(ratios_after):.1f}×; "
          f"the GET's CPU after ÷ before {med(gains):.2f} (range {min(gains):.2f}–{max(gains):.2f})")


def _measure(args, daphne, port: int, key: str, sessions: list[str]) -> list[tuple]:
    """Fire each kind's bursts at the running `daphne`; return (label, wall, p50, p99, CPU per request) medians."""
    from bench.request_path import percentile

    kinds = [
        ("GET /bench/minimal (no Django: baseline)", "GET", ["/bench/minimal"], None, None, 200),
        ("GET /v1/agents, no key (Django, 403)", "GET", ["/v1/agents"], None, None, 403),
        ("GET /v1/agents, API key (empty org)", "GET", ["/v1/agents"], key, None, 200),
        ("POST one event (append)", "POST", [f"/v1/agents/sessions/{s}/events" for s in sessions], key,
         {"kind": "log", "payload": {"text": "a turn of a run"}}, 201),
    ]
    rows = []
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("daphne did not listen; see its daphne.log") from None
            time.sleep(0.1)
    for label, method, paths, auth, body, expect in kinds:
        asyncio.run(_burst(port, 50, method, paths, auth, body, expect))  # warm-up
        walls, p50s, p99s, cpus = [], [], [], []
        for _ in range(args.rounds):
            cpu = _cpu_seconds(daphne.pid)
            start = time.perf_counter()
            latencies = asyncio.run(_burst(port, args.n, method, paths, auth, body, expect))
            walls.append(time.perf_counter() - start)
            cpus.append((_cpu_seconds(daphne.pid) - cpu) / args.n)
            p50s.append(statistics.median(latencies))
            p99s.append(percentile(latencies, 0.99))
        rows.append((label, statistics.median(walls), statistics.median(p50s), statistics.median(p99s), statistics.median(cpus)))
    return rows


def _print(args, rows: list[tuple], load_before: float) -> None:
    load = os.getloadavg()[0]
    print(f"burst_floor.py — {args.n} requests at once on one daphne process, SQLite stores, {os.cpu_count()} CPUs, "
          f"load average {load_before:.1f} → {load:.1f}; median of {args.rounds} rounds")
    print(f"{'kind':<44}{'wall':>10}{'p50':>10}{'p99':>10}{'server CPU':>14}{'wall ÷ baseline':>17}")
    base = rows[0][1]
    for label, wall, p50, p99, cpu in rows:
        print(f"{label:<44}{wall * 1000:>8.0f}ms{p50 * 1000:>8.0f}ms{p99 * 1000:>8.0f}ms{cpu * 1000:>9.2f} ms/req{wall / base:>16.1f}×")


if __name__ == "__main__":
    main()
