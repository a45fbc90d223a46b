"""Benchmark: background runs on django-q2 — dispatch latency per broker, one worker's throughput.

1. Time from `POST /v1/agents/{ref}/run` (`"background": true`) to the run's start
   (`started_at`, stamped by the worker), one run at a time on an idle queue, with the ORM
   broker and with Redis: from the request sent, and from the 202 received (the run may start
   before the client has read its 202). Baseline in the same run and broker: django-q2's own
   dispatch latency for an empty task (`async_task("time.time")`: call → function running).
2. Runs per minute one worker sustains: N background runs posted at once, from the first 202
   to the last run finished, against the loopback OpenAI-compatible upstream. Baseline: the
   same N runs posted synchronously one after another to the same daphne process.

Real parts only: a daphne process, a `manage.py qcluster` process (1 worker), the loopback
upstream, SQLite files (a fresh temporary data directory) and Redis on 127.0.0.1:6379 (db 15).

Run: `.venv/bin/python bench/background.py [--latency-runs 30] [--throughput-runs 60] [--model-delay 0]`
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REDIS_URL = "redis://127.0.0.1:6379/15"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def setup_site(data_dir: str):
    """Configure Django on a fresh data dir; return (org slug, API key)."""
    os.environ["AGENTS_DATA_DIR"] = data_dir
    os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"
    for name in ("DATABASE_URL", "REDIS_URL", "AGENTS_ORG_DATABASE", "INFERENCE_BASE_URL"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    from billing.services import credit_add
    from tenancy.services import api_key_create, membership_set, org_create

    call_command("migrate", verbosity=0)
    org = org_create(slug="bench-bg")
    member = membership_set(org=org, username="bench", is_admin=True)
    _, key = api_key_create(org=org, user=member.user)
    credit_add(org=org, cents=10_000_000, note="bench")
    return org.slug, key


def run_started(slug: str, run_id: str) -> tuple[float | None, str]:
    """Return (started_at as epoch seconds or None, status) of a run, read from the org store."""
    from runs.models import Run
    from tenancy import stores

    with stores.org_context(slug):
        row = Run.objects.filter(pk=run_id).values_list("started_at", "status").first()
    if row is None:
        return None, ""
    return (row[0].timestamp() if row[0] else None), row[1]


def wait(predicate, timeout: float = 60.0, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("benchmark step timed out")


def measure_broker(label: str, env: dict, slug: str, key: str, base_env: dict, args) -> dict:
    """Start daphne + a 1-worker cluster with `env`; measure latency and throughput."""
    import httpx
    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.models import Success
    from django_q.tasks import async_task

    from tests.support.live import LiveServer
    from tests.support.qcluster import QCluster

    full_env = {**base_env, **env}
    server = LiveServer(full_env).start()
    cluster = QCluster({**full_env, "AGENTS_Q_WORKERS": "1", "AGENTS_LOG_LEVEL": "WARNING"}, name=f"bench-{label}").start()
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    try:
        # The bench process enqueues the baseline tasks on the same broker as the server.
        if "REDIS_URL" in env:
            Conf.REDIS = env["REDIS_URL"]
            Conf.ORM = None
        broker = get_broker()
        warm = async_task("time.time", broker=broker)  # the cluster is up and its worker idle
        wait(lambda: Success.objects.filter(id=warm).exists(), timeout=60)
        time.sleep(0.5)

        # Each sample starts at a random phase of the ORM broker's poll cycle (0.2 s sleeps when
        # the queue is empty); without it, samples taken right after the previous task lock
        # onto one phase.
        # 1a. baseline: django-q2's own dispatch latency (enqueue call → empty task running)
        bare = []
        for _ in range(args.latency_runs):
            time.sleep(random.uniform(0, 0.25))
            t_call = time.time()
            task_id = async_task("time.time", broker=broker)
            done = wait(lambda: Success.objects.filter(id=task_id).values_list("result", flat=True).first(), timeout=30)
            bare.append(float(done) - t_call)
        # 1b. ours: POST sent → run started, and 202 received → run started
        ours, after_202 = [], []
        for _ in range(args.latency_runs):
            time.sleep(random.uniform(0, 0.25))
            t_sent = time.time()
            response = client.post("/v1/agents/bench/run", json={"input": "hi", "background": True})
            t_202 = time.time()
            assert response.status_code == 202, response.text
            run_id = response.json()["runId"]
            started = wait(lambda: run_started(slug, run_id)[0], timeout=30)
            ours.append(started - t_sent)
            after_202.append(started - t_202)
            wait(lambda: run_started(slug, run_id)[1] in ("ok", "error"), timeout=30)

        # 2a. one worker's throughput: N runs posted at once
        t0 = time.perf_counter()
        ids = []
        for _ in range(args.throughput_runs):
            response = client.post("/v1/agents/bench/run", json={"input": "hi", "background": True})
            assert response.status_code == 202, response.text
            ids.append(response.json()["runId"])
        for run_id in ids:
            wait(lambda: run_started(slug, run_id)[1] in ("ok", "error"), timeout=300, interval=0.02)
        worker_s = time.perf_counter() - t0
        statuses = [run_started(slug, r)[1] for r in ids]
        # 2b. baseline: the same number of synchronous runs, one after another
        t0 = time.perf_counter()
        for _ in range(args.throughput_runs):
            assert client.post("/v1/agents/bench/run", json={"input": "hi"}).status_code == 200
        sync_s = time.perf_counter() - t0
    finally:
        client.close()
        cluster.stop()
        server.stop()
    return {
        "label": label,
        "bare_p50": pct(bare, 0.5) * 1000,
        "bare_p99": pct(bare, 0.99) * 1000,
        "ours_p50": pct(ours, 0.5) * 1000,
        "ours_p99": pct(ours, 0.99) * 1000,
        "a202_p50": pct(after_202, 0.5) * 1000,
        "a202_p99": pct(after_202, 0.99) * 1000,
        "worker_rpm": args.throughput_runs / worker_s * 60,
        "sync_rpm": args.throughput_runs / sync_s * 60,
        "ok": statuses.count("ok"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--throughput-runs", type=int, default=60)
    parser.add_argument("--model-delay", type=float, default=0.0, help="seconds the loopback model takes per answer")
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="agents-bench-bg-")
    slug, key = setup_site(data_dir)

    from tests.support.upstream import Upstream

    upstream = Upstream().start()
    upstream.default_delay = args.model_delay
    base_env = {
        "INFERENCE_BASE_URL": upstream.base_url,
        "INFERENCE_API_KEY": "bench",
        "AGENTS_DEFAULT_MODEL": "test-model",
    }
    os.environ.update(base_env)
    from agents.services import AgentInput, agent_create
    from tenancy import stores

    with stores.org_context(slug):
        agent_create(data=AgentInput(name="bench", instructions="Answer briefly."))

    import redis

    redis.from_url(REDIS_URL).flushdb()
    results = [
        measure_broker("orm", {}, slug, key, base_env, args),
        measure_broker("redis", {"REDIS_URL": REDIS_URL}, slug, key, base_env, args),
    ]
    upstream.stop()
    redis.from_url(REDIS_URL).flushdb()

    for r in results:
        print(f"[{r['label']} broker]")
        print(f"  django-q2 empty task, enqueue call -> running (baseline): p50 {r['bare_p50']:.1f} ms  p99 {r['bare_p99']:.1f} ms")
        print(f"  background run, POST sent -> run started:               p50 {r['ours_p50']:.1f} ms  p99 {r['ours_p99']:.1f} ms")
        print(f"  background run, 202 received -> run started:            p50 {r['a202_p50']:.1f} ms  p99 {r['a202_p99']:.1f} ms")
        print(f"  ratio POST->start / baseline: p50 {r['ours_p50'] / r['bare_p50']:.2f}  p99 {r['ours_p99'] / r['bare_p99']:.2f}")
        print(f"  one worker: {r['worker_rpm']:.0f} runs/min ({r['ok']}/{args.throughput_runs} ok); "
              f"synchronous runs on daphne (baseline): {r['sync_rpm']:.0f} runs/min; ratio {r['worker_rpm'] / r['sync_rpm']:.2f}")
    orm, red = results
    print(f"redis/orm POST->start ratio: p50 {red['ours_p50'] / orm['ours_p50']:.3f}  p99 {red['ours_p99'] / orm['ours_p99']:.3f}")
    shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
