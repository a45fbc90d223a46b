"""Benchmark: what the credential guard at the storage boundary costs a run and an append (issue 49 item 3).

The same code measured with the guard (`after`) and without it (`before`: `AGENTS_BENCH_STORAGE_GUARD_OFF=1`
in the bench's process and its daphne, so `sessions.storage_guard.install()` wraps nothing; every other
line is the same), in interleaved pairs — the order flips every pair (on/off, off/on, …) so a drift of the
shared machine's load hits both sides alike — and reported as the median of the `--pairs` (5) figures of
each side, with the 1-minute load average before each measurement:

* run: `bench/run_overhead.py` — `POST /v1/agents/{ref}/run` p50 on daphne, instant upstream and a 300 ms
  model latency (the bare SDK call beside it);
* append: `bench/request_path.py` — single event appends over HTTP, 1 and 8 keep-alive clients (appends/s
  and p50), and 500-event batches (events/s);
* scanning: `bench/scanner.py --guard` — µs/KiB at 4 KiB and 4 MiB (fresh texts) and the guard's cost per
  write of an event payload and of a run row, in process (no before/after: the scanner is the same);
* share (`--part share`, in this process, Django's test client, no network): the guard's own time inside
  the same requests — `guard_value` wrapped with a clock — against each request's whole time, for a run
  (instant upstream), a single append and a 500-event batch. A share measured inside one request is not
  moved by the machine's load the way two separate measurements are.

    .venv/bin/python bench/guard_ab.py [--pairs 5] [--part run,append,scan]
    .venv/bin/python bench/guard_ab.py --part share [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWITCH = "AGENTS_BENCH_STORAGE_GUARD_OFF"
NUMBER = r"([0-9][0-9,]*\.?[0-9]*)"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _run(argv: list[str], *, guard: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != SWITCH}
    if not guard:
        env[SWITCH] = "1"
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def run_figures(out: str) -> dict[str, float]:
    """Parse bench/run_overhead.py's table: run p50 and the SDK's p50, both upstream latencies (ms)."""
    figures = {}
    for line in out.splitlines():
        for label, key in (("instant upstream", "instant"), ("upstream latency", "latency")):
            if line.startswith(label):
                values = [_num(v) for v in re.findall(r"(?<![\w.])([0-9]+\.[0-9]+)", line[28:])]
                figures[f"{key} SDK p50 ms"], figures[f"{key} run p50 ms"] = values[0], values[2]
                figures[f"{key} run p99 ms"] = values[3]
    return figures


def append_figures(out: str) -> dict[str, float]:
    """Parse bench/request_path.py: appends/s and p50 with 1 and 8 clients, batch events/s, GET p50."""
    figures = {}
    for line in out.splitlines():
        if m := re.search(rf"appends, 1 client: {NUMBER}/s, p50 {NUMBER} ms", line):
            figures["appends/s, 1 client"], figures["append p50 ms, 1 client"] = _num(m[1]), _num(m[2])
        elif m := re.search(rf"appends, \d+ keep-alive clients: {NUMBER}/s, p50 {NUMBER} ms", line):
            figures["appends/s, 8 clients"], figures["append p50 ms, 8 clients"] = _num(m[1]), _num(m[2])
        elif m := re.search(rf"batch append, .*: {NUMBER} events/s", line):
            figures["batch events/s"] = _num(m[1])
        elif m := re.search(rf"GET /v1/agents \(API key, empty org\):\s+p50 {NUMBER} ms", line):
            figures["GET /v1/agents p50 ms"] = _num(m[1])
    return figures


def scan_figures(out: str) -> dict[str, float]:
    """Parse bench/scanner.py --guard: µs/KiB at 4 KiB and 4 MiB, the guard's µs per write."""
    figures = {}
    for line in out.splitlines():
        if m := re.search(rf"scanning (\d+) KiB: {NUMBER} µs/KiB", line):
            figures[f"scanning µs/KiB at {m[1]} KiB"] = _num(m[2])
        elif m := re.search(rf"storage guard, (an event payload|a run row).*: {NUMBER} µs a write", line):
            figures[f"guard µs, {m[1]}"] = _num(m[2])
        elif m := re.search(r"probe corpus: (\d+)/(\d+)", line):
            figures["probe recall"] = int(m[1]) / int(m[2])
    return figures


PARTS = {
    "run": (["bench/run_overhead.py", "--requests", "150", "--latency-ms", "300", "--profile-runs", "20"], run_figures, True),
    "append": (["bench/request_path.py", "--requests", "100", "--appends", "1200", "--batches", "10"], append_figures, True),
    "scan": (["bench/scanner.py", "--guard", "--repeat", "3"], scan_figures, False),
}


def share(rounds: int, n: int = 100) -> None:
    """Print the guard's share of a run, an append and a batch append, in process (see the module doc)."""
    import tempfile

    for name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "REDIS_URL", "DATABASE_URL", "AGENTS_ORG_DATABASE", "CLOUD_AGENT_FEE_CENTS",
                 SWITCH):
        os.environ.pop(name, None)
    os.environ.update({"AGENTS_DATA_DIR": tempfile.mkdtemp(prefix="agents-bench-guard-"), "DJANGO_SETTINGS_MODULE": "agents_site.settings"})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from billing.services import credit_add
    from sessions import storage_guard
    from sessions.services import session_create
    from tenancy import stores
    from tenancy.services import api_key_create, membership_set, org_create
    from tests.support.upstream import Upstream

    call_command("migrate", verbosity=0, interactive=False)
    upstream = Upstream().start()
    upstream.models = ["bench-model"]
    from django.conf import settings

    settings.INFERENCE_BASE_URL, settings.AGENTS_DEFAULT_MODEL = upstream.base_url, "bench-model"
    org = org_create(slug="bench", name="bench")
    member = membership_set(org=org, username="bench", is_admin=True)
    _, key = api_key_create(org=org, user=member.user)
    credit_add(org=org, cents=10**9, actor="bench")
    with stores.org_context("bench"):
        session = session_create(agent="bench", actor="bench").id
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.post("/v1/agents", {"name": "bench", "model": "bench-model"}, content_type="application/json").status_code == 201

    spent = [0.0, 0]
    original = storage_guard.guard_value

    def clocked(value, *, where=""):
        start = time.perf_counter()
        try:
            return original(value, where=where)
        finally:
            spent[0] += time.perf_counter() - start
            spent[1] += 1

    storage_guard.guard_value = clocked  # the wrapped fields look the name up at each write
    batch = {"events": [{"kind": "log", "payload": {"n": i, "text": "a turn of a run"}} for i in range(500)]}
    kinds = {
        "a run (instant upstream)": ("/v1/agents/bench/run", {"input": "Summarise the benefits of per-org SQLite files."}, 200, n),
        "a single append": (f"/v1/agents/sessions/{session}/events", {"kind": "log", "payload": {"n": 1, "text": "a turn"}}, 201, n),
        "a 500-event batch": (f"/v1/agents/sessions/{session}/events", batch, 201, max(3, n // 20)),
    }
    print(f"# the guard's share, in process — load average {os.getloadavg()[0]:.1f}")
    figures: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
    for _ in range(rounds):
        for label, (path, body, status, count) in kinds.items():
            assert client.post(path, body, content_type="application/json").status_code == status  # warm
            spent[:] = [0.0, 0]
            start = time.perf_counter()
            for _ in range(count):
                response = client.post(path, body, content_type="application/json")
                assert response.status_code == status, response.content[:300]
            whole = time.perf_counter() - start
            figures[label].append((spent[0] / whole, whole / count * 1e3, spent[1] / count))
    for label, rows in figures.items():
        shares = [r[0] for r in rows]
        print(f"  {label:<26} guard {statistics.median(shares) * 100:5.1f} % of the request (each round: "
              f"{', '.join(f'{x * 100:.1f}' for x in shares)}); {statistics.median(r[1] for r in rows):.2f} ms a request, "
              f"{statistics.median(r[2] for r in rows):.0f} guarded values a request")
    print(f"  load average {os.getloadavg()[0]:.1f} at the end")
    upstream.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--part", default="run,append,scan", help="comma-separated: run, append, scan; or share alone")
    args = parser.parse_args()
    parts = [p.strip() for p in args.part.split(",") if p.strip()]
    if parts == ["share"]:
        share(args.pairs)
        return
    results: dict[tuple[str, str], list[dict]] = {}
    loads: list[float] = []
    print(f"# bench/guard_ab.py — {os.cpu_count()} CPUs, {args.pairs} pairs, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    for pair in range(args.pairs):
        for part in parts:
            argv, parse, paired = PARTS[part]
            sides = (("after", True), ("before", False)) if pair % 2 == 0 else (("before", False), ("after", True))
            for side, guard in sides if paired else (("after", True),):
                load = os.getloadavg()[0]
                loads.append(load)
                began = time.monotonic()
                figures = parse(_run(argv, guard=guard))
                results.setdefault((part, side), []).append(figures)
                print(f"pair {pair + 1} {part:<6} {side:<6} load {load:4.1f} {time.monotonic() - began:5.0f} s  "
                      + ", ".join(f"{k} {v:g}" for k, v in figures.items()), flush=True)
    print(f"\nmedians of {args.pairs} (load average {min(loads):.1f}–{max(loads):.1f} over the measurements):")
    for part in parts:
        after = results.get((part, "after"), [])
        before = results.get((part, "before"), [])
        for key in after[0] if after else []:
            a = statistics.median(f[key] for f in after if key in f)
            if before:
                b = statistics.median(f[key] for f in before if key in f)
                print(f"  {part:<6} {key:<28} before {b:10.2f}  after {a:10.2f}  after ÷ before {a / b:6.3f}")
            else:
                print(f"  {part:<6} {key:<28} {a:10.4g}  (each: {', '.join(f'{f[key]:g}' for f in after)})")


if __name__ == "__main__":
    main()
