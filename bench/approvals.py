"""Benchmark: what 1,000 runs waiting for approval cost the server (issue 28 item 4).

A real daphne (embedded defaults: SQLite org store, in-memory layer) and the loopback upstream,
whose every answer is a turn calling a tool the agent's approval rules name. N sync
`POST /v1/agents/{ref}/run` each answer 202 with the run `waiting`; then the daphne process's
threads and resident memory (`/proc/<pid>/status`: `Threads`, `VmRSS`) are read and set against
the same process idle after a warm-up (one waiting run, so every code path is loaded).
Goal: no thread and under 10 MiB over idle for 1,000 waiting runs.

Run: `.venv/bin/python bench/approvals.py [--runs 1000]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def proc_status(pid: int) -> dict:
    """Return `Threads` and `VmRSS` (KiB) of process `pid`."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Threads", "VmRSS"):
            found[key] = int(value.split()[0])
    return found


def setup_site(data_dir: str):
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
    org = org_create(slug="bench-approvals")
    member = membership_set(org=org, username="bench", is_admin=True)
    _, key = api_key_create(org=org, user=member.user)
    credit_add(org=org, cents=100_000_000, note="bench")
    return org.slug, key


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    args = parser.parse_args()
    slug, key = setup_site(tempfile.mkdtemp(prefix="agents-bench-approvals-"))

    import httpx

    from tests.support.live import LiveServer
    from tests.support.upstream import Reply, Upstream

    upstream = Upstream().start()
    env = {"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": "test-model",
           "AGENTS_LOG_LEVEL": "WARNING"}
    os.environ.update(env)
    from agents.services import AgentInput, agent_create
    from tenancy import stores

    with stores.org_context(slug):
        agent_create(data=AgentInput(name="careful", tools=["calculator"], approval={"tools": ["calculator"]}))
    server = LiveServer(env).start(timeout=600)
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    asking = lambda: Reply(tool_calls=[("calculator", {"expression": "2+3"})])  # noqa: E731
    try:
        for _ in range(3):  # warm-up: every path of a waiting run loaded once
            upstream.script(asking())
            assert client.post("/v1/agents/careful/run", json={"input": "add"}).status_code == 202
        time.sleep(2)
        idle = proc_status(server.proc.pid)
        started = time.perf_counter()
        for _ in range(args.runs):
            upstream.script(asking())
            response = client.post("/v1/agents/careful/run", json={"input": "add"})
            assert response.status_code == 202, response.text
        took = time.perf_counter() - started
        time.sleep(2)
        after = proc_status(server.proc.pid)
        waiting = len([a for a in client.get("/v1/agents/approvals").json()["approvals"] if a["state"] == "pending"])
    finally:
        server.stop()
        upstream.stop()
    print(f"{args.runs} runs waiting for approval (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print(f"{'':34} {'threads':>8} {'RSS MiB':>9}")
    print(f"{'daphne idle after warm-up':34} {idle['Threads']:8d} {idle['VmRSS'] / 1024:9.1f}")
    print(f"{'daphne with the runs waiting':34} {after['Threads']:8d} {after['VmRSS'] / 1024:9.1f}")
    print(f"{'over idle':34} {after['Threads'] - idle['Threads']:8d} {(after['VmRSS'] - idle['VmRSS']) / 1024:9.1f}")
    print(f"asking took {took:.1f} s ({took / args.runs * 1000:.1f} ms per run); the list shows {waiting} pending (it pages at 100)")


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
