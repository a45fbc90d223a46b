"""Benchmark: what POST /v1/agents/{ref}/run adds on top of the bare SDK call it makes.

Starts the loopback OpenAI-compatible upstream (tests/support/upstream.py) and a real daphne
process serving the site, provisions an org, an API key, credit and an agent, then measures in
the same run, sequentially and with keep-alive clients on both sides:

* baseline: the bare `openai` SDK `chat.completions.create` to the upstream;
* run:      `POST /v1/agents/{ref}/run` on daphne (auth, org store, balance gate, run record,
            session bookkeeping, the same SDK call, record, debit, spans).

Both are measured with the upstream answering at once (the worst case for the ratio: the
whole cost is ours) and with a simulated model latency (`--latency-ms`, default 300 ms, still
far below a real model's). Then an in-process profile of the same run path attributes the
added milliseconds to its parts.

    .venv/bin/python bench/run_overhead.py [--requests 300] [--latency-ms 300]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

for _name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL",
              "AGENTS_ORG_DATABASE", "CLOUD_AGENT_FEE_CENTS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
    os.environ.pop(_name, None)
os.environ["AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="agents-bench-")
os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"

MODEL = "bench-model"
PROMPT = "Summarise the benefits of per-org SQLite files in one sentence."


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (0..100) of `values`, nearest-rank."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def timed(fn, n: int) -> list[float]:
    """Call `fn` n times; return each call's wall time in milliseconds."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def provision():
    """Migrate the default database; create an org with an API key, credit and an agent row."""
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from billing.services import credit_add
    from tenancy.services import api_key_create, membership_set, org_create

    org = org_create(slug="bench", name="bench")
    membership = membership_set(org=org, username="bench", password="bench-password", is_admin=True)
    _, key = api_key_create(org=org, user=membership.user)
    credit_add(org=org, cents=10**9, actor="bench")
    return org, key


def measure(args, upstream, key: str) -> dict:
    import httpx
    import openai

    from tests.support.live import LiveServer

    server = LiveServer({"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": MODEL}).start()
    try:
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        created = http.post("/v1/agents", json={"name": "bench", "model": MODEL, "instructions": "Answer in one sentence."})
        assert created.status_code == 201, created.text
        sdk = openai.OpenAI(base_url=upstream.base_url, api_key="bench", max_retries=0)
        messages = [{"role": "system", "content": "Answer in one sentence."}, {"role": "user", "content": PROMPT}]

        def bare():
            sdk.chat.completions.create(model=MODEL, messages=messages)

        durations: list[float] = []

        def run():
            response = http.post("/v1/agents/bench/run", json={"input": PROMPT})
            assert response.status_code == 200, response.text
            durations.append(response.json()["durationMs"])

        results = {}
        for label, latency in (("instant upstream", 0.0), (f"upstream latency {args.latency_ms} ms", args.latency_ms / 1000)):
            upstream.default_delay = latency
            n = args.requests if latency == 0 else max(args.requests // 5, 20)
            timed(bare, 10)
            timed(run, 10)
            base, ours = [], []
            durations.clear()
            for _ in range(n):  # interleaved, so drift hits both alike
                base += timed(bare, 1)
                ours += timed(run, 1)
            results[label] = (n, base, ours, list(durations))
        return results
    finally:
        server.stop()


def profile_in_process(org, n: int) -> list[tuple[str, float]]:
    """Run the path n times in this process (Django test client) under cProfile; return
    `(part, ms per run)` for the parts of the path, measured by cumulative time."""
    from django.test import Client

    from agents import inference
    inference.reset_caches()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {org['key']}")
    client.post("/v1/agents/bench/run", {"input": PROMPT}, content_type="application/json")
    plain = timed(lambda: client.post("/v1/agents/bench/run", {"input": PROMPT}, content_type="application/json"), n)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(n):
        response = client.post("/v1/agents/bench/run", {"input": PROMPT}, content_type="application/json")
        assert response.status_code == 200
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    parts = [
        ("whole request, in process, profiled", "django/test/client.py", "post"),
        ("principal: API key lookup", "tenancy/principal.py", "resolve_principal"),
        ("agent lookup", "agents/selectors.py", "agent_get"),
        ("lifecycle: run_start (key, gate, row, session)", "runs/lifecycle.py", "run_start"),
        ("gate: fees held (org store)", "runs/lifecycle.py", "fees_held"),
        ("gate: balance read (ledger)", "billing/meter.py", "balance_authorize"),
        ("open the run's session (in run_start)", "runs/lifecycle.py", "_session_open"),
        ("attach the executor inbox", "runs/run_session.py", "attach"),
        ("session events", "runs/run_session.py", "append"),
        ("resolve tools", "agents/tools/registry.py", "resolve_tools"),
        ("the SDK call itself", "agents/inference.py", "chat_completion"),
        ("lifecycle: run_finish (record, summary, close, debit)", "runs/lifecycle.py", "run_finish"),
        ("session close", "runs/run_session.py", "close"),
        ("debit", "billing/meter.py", "run_charge"),
    ]
    out = [("whole request, in process, NOT profiled (mean)", statistics.mean(plain))]
    for label, path, func in parts:
        total = sum(v[3] for k, v in stats.items() if k[0].endswith(path) and k[2] == func)
        out.append((label, total * 1000 / n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--profile-runs", type=int, default=100)
    args = parser.parse_args()

    from tests.support.upstream import Upstream

    upstream = Upstream().start()
    upstream.models = [MODEL]
    org, key = provision()
    os.environ["INFERENCE_BASE_URL"] = upstream.base_url
    results = measure(args, upstream, key)

    print(f"POST /v1/agents/{{ref}}/run on daphne vs the bare SDK call, sequential, {os.cpu_count()} CPUs\n")
    print(f"{'upstream':<28}{'n':>5}{'SDK p50':>10}{'SDK p99':>10}{'run p50':>10}{'run p99':>10}{'ratio p50':>11}{'ratio p99':>11}{'added p50':>11}{'in-run p50':>12}")
    for label, (n, base, ours, inside) in results.items():
        b50, b99, o50, o99 = percentile(base, 50), percentile(base, 99), percentile(ours, 50), percentile(ours, 99)
        print(f"{label:<28}{n:>5}{b50:>9.2f}ms{b99:>9.2f}ms{o50:>9.2f}ms{o99:>9.2f}ms{o50 / b50:>10.2f}x{o99 / b99:>10.2f}x"
              f"{o50 - b50:>9.2f}ms{percentile(inside, 50):>10.0f}ms")
    print("(in-run = the run's own durationMs: session, tools, the SDK call, retries; the rest of 'run' is HTTP,")
    print(" auth, the gate, the run record, the debit and daphne)")

    from django.conf import settings

    upstream.default_delay = 0.0
    settings.INFERENCE_BASE_URL = upstream.base_url
    settings.AGENTS_DEFAULT_MODEL = MODEL
    print(f"\nWhere the added milliseconds go (in-process profile of {args.profile_runs} runs, instant upstream, ms per run;")
    print("cProfile inflates every figure, so read them as shares):")
    for label, ms in profile_in_process({"key": key}, args.profile_runs):
        print(f"  {label:<50}{ms:>8.2f}")
    upstream.stop()


if __name__ == "__main__":
    main()
