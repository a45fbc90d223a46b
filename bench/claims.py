"""Benchmark: what 1,000 idle claim long-polls cost one daphne process, and how fast an offer lands.

1. One daphne process. With `--layer redis` (default) the channel layer is Redis and the runs
   are offered by this script's process (`targets.mailbox.routed_offer`, as a run path in
   another process would), so each wake-up crosses processes; with `--layer memory` the layer is
   in-memory and the runs are offered inside daphne by `POST /v1/agents/{ref}/run` with
   `targetId` (the whole route: gate, run, session, offer). Baseline: its resident memory and
   CPU over a window with no claims. Then 1,000 machines each hold one claim open (`POST …/claim`, waiting up to
   `AGENTS_CLAIM_WAIT_SECONDS`=120): resident memory and CPU over the same window. Ratios:
   memory with/without and KiB per waiting claim; CPU against the design long-polling replaces
   (the same machines asking `GET /targets/{id}` every 5 s), measured on the same process.
2. While the claims wait, runs are offered one at a time to machines with a waiting claim and
   the time from the offer (the `routed_offer` call, or sending the `POST …/run`) to the claim's
   200 arriving is taken. Baseline in the same run and under the same load: the
   round trip of a plain `GET /v1/agents/targets/{id}`. Ratio: offer→claim p99 / GET p99.

Run: `.venv/bin/python bench/claims.py [--layer redis|memory] [--claims 1000] [--offers 200]
[--window 10]` (a fresh temporary data directory; `redis` needs Redis on 127.0.0.1:6379, db 11).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.request_path import stop as stop_daphne  # noqa: E402

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/11")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Threads:"))


async def window(pid: int, seconds: float) -> tuple[float, float]:
    """Return (CPU % of one core, RSS MiB at the end) over `seconds`."""
    start_cpu, start = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    used = cpu_seconds(pid) - start_cpu
    return 100 * used / (time.monotonic() - start), rss_bytes(pid) / 2**20


def setup(n: int):
    """Migrate a fresh data dir; create an org, its admin's API key and `n` keyed machines."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from targets.models import ClaimKey, Target
    from targets.keys import CLAIM_KEY_PREFIX, hash_claim_key
    from tenancy import stores
    from tenancy.services import api_key_create, membership_set, org_create
    from django.utils import timezone
    import secrets

    org = org_create(slug="bench", name="bench")
    member = membership_set(org=org, username="bench", is_admin=True)
    _, api_key = api_key_create(org=org, user=member.user)
    machines = []
    now = timezone.now()
    with stores.org_context("bench"):
        from agents.services import AgentInput, agent_create

        agent_create(data=AgentInput(name="bench", model="bench-model"))
        rows, keys = [], []
        for i in range(n):
            target_id = f"tgt_{i:032x}"
            key = CLAIM_KEY_PREFIX + secrets.token_hex(32)
            rows.append(Target(id=target_id, owner="bench", label=f"m{i}", created_at=now, updated_at=now))
            keys.append(ClaimKey(target_id=target_id, key_hash=hash_claim_key(key), updated_at=now))
            machines.append((target_id, key))
        Target.objects.bulk_create(rows)
        ClaimKey.objects.bulk_create(keys)
    return api_key, machines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--offers", type=int, default=200)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--poll-interval", type=float, default=5.0)
    parser.add_argument("--layer", choices=("redis", "memory"), default="redis",
                        help="redis: offers made by this process (routed_offer) cross to daphne over Redis; "
                             "memory: in-memory layer, offers made in daphne itself by POST /v1/agents/{ref}/run with targetId")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="agents-bench-claims-")
    os.environ.update({"AGENTS_DATA_DIR": data_dir, "DJANGO_SETTINGS_MODULE": "agents_site.settings"})
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    if args.layer == "redis":
        import redis

        os.environ["REDIS_URL"] = REDIS_URL
        redis.Redis.from_url(REDIS_URL).flushdb()
    api_key, machines = setup(args.claims)
    asyncio.run(measure(args, api_key, machines, data_dir))


async def measure(args, api_key: str, machines: list[tuple[str, str]], data_dir: str) -> None:
    import httpx

    port = 18000 + os.getpid() % 1000
    env = {**os.environ, "AGENTS_CLAIM_WAIT_SECONDS": "120", "PYTHONPATH": str(ROOT), "CLOUD_AGENT_FEE_CENTS": "0"}
    log = open(Path(data_dir) / "daphne.log", "wb")
    daphne = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "server.asgi:application"],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {api_key}"}
    limits = httpx.Limits(max_connections=args.claims + 50, max_keepalive_connections=args.claims + 50)
    try:
        async with httpx.AsyncClient(base_url=base, timeout=180, limits=limits) as client:
            for _ in range(200):
                try:
                    await client.get("/v1/agents/targets/" + machines[0][0], headers=auth)
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            for _ in range(20):  # warm the process (imports, connections) before measuring
                await client.get("/v1/agents/targets/" + machines[0][0], headers=auth)

            idle_cpu, idle_rss = await window(daphne.pid, args.window)
            idle_threads = threads(daphne.pid)

            answered: dict[str, float] = {}
            stop = asyncio.Event()

            async def hold(target_id: str, key: str) -> None:
                headers = {**auth, "X-Target-Key": key}
                while not stop.is_set():
                    r = await client.post(f"/v1/agents/targets/{target_id}/claim", headers=headers)
                    if r.status_code == 200:
                        answered[r.json()["runId"]] = time.perf_counter()
                        return
                    if r.status_code != 204:
                        raise RuntimeError(f"claim answered {r.status_code}: {r.text}")

            holders = [asyncio.create_task(hold(t, k)) for t, k in machines]
            # every claim is in: each one stamped its machine's serving_at
            from tenancy import stores
            from targets.models import ClaimKey

            def stamped() -> int:
                with stores.org_context("bench"):
                    return ClaimKey.objects.filter(serving_at__isnull=False).count()

            open_started = time.monotonic()
            while await asyncio.to_thread(stamped) < args.claims:
                await asyncio.sleep(0.2)
            opened_in = time.monotonic() - open_started
            settle_started = time.monotonic()  # subscriptions finish after the stamps: wait for calm
            while time.monotonic() - settle_started < 60 and (await window(daphne.pid, 1.0))[0] > 2.0:
                pass
            busy_cpu, busy_rss = await window(daphne.pid, args.window)
            busy_threads = threads(daphne.pid)

            # the baseline round trip under the same load
            gets = []
            for i in range(args.offers):
                t0 = time.perf_counter()
                r = await client.get("/v1/agents/targets/" + machines[i][0], headers=auth)
                gets.append(time.perf_counter() - t0)
                assert r.status_code == 200

            from targets.mailbox import routed_offer

            def do_offer(target_id: str, run_id: str) -> float:
                with stores.org_context("bench"):
                    t0 = time.perf_counter()
                    routed_offer(target_id=target_id, run_id=run_id, session_id="", payload={"input": "bench"})
                    return t0

            async def post_run(target_id: str) -> tuple[str, float]:
                t0 = time.perf_counter()
                r = await client.post("/v1/agents/bench/run", json={"input": "bench", "targetId": target_id}, headers=auth)
                assert r.status_code == 202, r.text
                return r.json()["id"], t0

            latencies = []
            for i in range(args.offers):
                if args.layer == "redis":
                    run_id = f"run_bench_{i}"
                    t0 = await asyncio.to_thread(do_offer, machines[i][0], run_id)
                else:
                    run_id, t0 = await post_run(machines[i][0])
                for _ in range(10_000):
                    if run_id in answered:
                        break
                    await asyncio.sleep(0.0005)
                latencies.append(answered[run_id] - t0)
            stop.set()
            for task in holders:
                task.cancel()
            await asyncio.gather(*holders, return_exceptions=True)

            # the design long-polling replaces: every machine asks "any work?" every few seconds
            polls = [0]

            async def poll(i: int) -> None:
                await asyncio.sleep(args.poll_interval * i / len(machines))
                while True:
                    r = await client.get("/v1/agents/targets/" + machines[i][0], headers=auth)
                    assert r.status_code == 200
                    polls[0] += 1
                    await asyncio.sleep(args.poll_interval)

            await asyncio.sleep(2.0)
            pollers = [asyncio.create_task(poll(i)) for i in range(len(machines))]
            await asyncio.sleep(args.poll_interval)
            polls_before = polls[0]
            poll_cpu, poll_rss = await window(daphne.pid, args.window)
            poll_rate = (polls[0] - polls_before) / args.window
            for task in pollers:
                task.cancel()
            await asyncio.gather(*pollers, return_exceptions=True)
    finally:
        stop_daphne(daphne)

    n = args.claims
    how = ("Redis; offers by routed_offer in the benchmark process" if args.layer == "redis"
           else "in-memory; offers by POST /v1/agents/{ref}/run with targetId to the same daphne")
    print(f"claims.py — {n} idle claims on one daphne process (channel layer: {how}), window {args.window:g} s")
    print(f"  all {n} claims open and waiting after {opened_in:.1f} s")
    print(f"  resident memory: idle {idle_rss:.1f} MiB → {busy_rss:.1f} MiB with {n} waiting "
          f"(ratio {busy_rss / idle_rss:.2f}; {(busy_rss - idle_rss) * 1024 / n:.0f} KiB per waiting claim)")
    print(f"  threads: idle {idle_threads} → {busy_threads} with {n} waiting")
    print(f"  CPU (share of one core): idle {idle_cpu:.2f}% → {busy_cpu:.2f}% while {n} claims wait; "
          f"{poll_cpu:.2f}% while {n} machines short-poll every {args.poll_interval:g} s instead ({poll_rate:.0f} req/s) "
          f"(ratio waiting / polling {busy_cpu / max(poll_cpu, 0.01):.3f})")
    print(f"  offer → claim answered, {len(latencies)} offers: p50 {statistics.median(latencies) * 1000:.2f} ms, "
          f"p99 {pct(latencies, 0.99) * 1000:.2f} ms")
    print(f"  baseline GET /targets/{{id}} under the same load: p50 {statistics.median(gets) * 1000:.2f} ms, "
          f"p99 {pct(gets, 0.99) * 1000:.2f} ms")
    print(f"  ratio offer→claim / GET: p50 {statistics.median(latencies) / statistics.median(gets):.2f}, "
          f"p99 {pct(latencies, 0.99) / pct(gets, 0.99):.2f}")


if __name__ == "__main__":
    main()
