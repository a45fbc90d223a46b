"""Benchmark: stop → run terminal (issue 25), p50/p99 over N tries per case, with a baseline
measured in the same run.

Cases (real parts: daphne, a `manage.py qcluster` process, bubblewrap, the loopback upstream):

1. streamed reply: a sync run on daphne whose model streams a 30 s reply (300 pieces, one per
   0.1 s); once 3 pieces are out, `POST …/sessions/{id}/stop` to the same daphne; terminal = the
   run's 502 arrives (it is sent after the finish committed).
2. background run in another process: the same reply, the run in a 1-worker qcluster on the
   embedded defaults (ORM broker, an in-memory bus per process: the worker reads the stop from
   the control rows every `AGENTS_CONTROL_POLL_SECONDS`); terminal = the run row is `error`
   (read every 5 ms).
4. routed run: `python -m runner` (its own gateway: the loopback upstream, answering after 30 s)
   claims a run posted with `targetId`; once the model call is in flight, the stop is posted;
   terminal = the run row is `error` (the machine's report settled it).
3. sandboxed command: `sleep 60` under bubblewrap through the coding tools' stoppable path
   (`toolkit.stopping.run_stoppable`, what a coding run uses); stop = the run's `StopSignal`
   set (what its inbox does when the command arrives); terminal = `CommandCancelled` raised with
   the whole tree reaped. Component-level: cases 1–2 measure the command's delivery.

Baselines: cases 1–2 — the stop route's own round trip (POST → 200) in the same tries, the
floor any stop pays; case 3 — SIGKILL of a plain `sleep 60` process group and its reap.

Run: `.venv/bin/python bench/stop.py [--tries 20]`
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def wait(predicate, timeout: float = 60.0, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("benchmark step timed out")


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
    org = org_create(slug="bench-stop")
    member = membership_set(org=org, username="bench", is_admin=True)
    _, key = api_key_create(org=org, user=member.user)
    credit_add(org=org, cents=10_000_000, note="bench")
    return org.slug, key


def run_status(slug: str, run_id: str) -> str:
    from django.db import connections

    from runs.models import Run
    from tenancy import stores

    with stores.org_context(slug):
        status = Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
    connections.close_all()
    return status


def running_session(slug: str) -> str:
    from django.db import connections

    from runs.models import Run
    from sessions.models import Session
    from tenancy import stores

    with stores.org_context(slug):
        found = Run.objects.filter(status="running").exclude(session_id="").values_list("session_id", flat=True).first()
        attached = found and Session.objects.filter(pk=found).exclude(executor_channel="").exists()
    connections.close_all()
    return found if attached else ""


#: Stop answers other than 200 by status (none expected: the stop route answers 200 once the stop
#: is recorded and never waits for the executor's ack; a 502 forward_failed here is a regression).
refused: dict[int, int] = {}


def streamed_cases(args, upstream, slug: str, key: str, base_env: dict) -> list[dict]:
    import httpx

    from tests.support.live import LiveServer
    from tests.support.qcluster import QCluster
    from tests.support.upstream import Reply

    def long_reply():
        return Reply(content="word " * 300, chunk_size=5, chunk_delay=0.1)

    server = LiveServer(base_env).start(timeout=600)  # a loaded machine starts daphne slowly
    cluster = QCluster({**base_env, "AGENTS_Q_WORKERS": "1", "AGENTS_LOG_LEVEL": "WARNING"}, name="bench-stop").start()
    client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    results = []
    try:
        # 1. streamed reply, sync run in daphne
        stops, floors = [], []
        for _ in range(args.tries):
            upstream.reset()
            upstream.script(long_reply())
            box: dict = {}

            def call():
                box["response"] = client.post("/v1/agents/bench/run", json={"input": "talk"})
                box["at"] = time.perf_counter()

            thread = threading.Thread(target=call, daemon=True)
            thread.start()
            wait(lambda: upstream.streams and upstream.streams[0].sent >= 3)
            sid = wait(lambda: running_session(slug))
            t0 = time.perf_counter()
            answer = client.post(f"/v1/agents/sessions/{sid}/stop", json={})
            floors.append(time.perf_counter() - t0)
            refused[answer.status_code] = refused.get(answer.status_code, 0) + (answer.status_code != 200)
            thread.join(60)
            assert box["response"].json().get("finishReason") == "stopped", box["response"].text
            stops.append(box["at"] - t0)
        results.append({"case": "30 s streamed reply (sync run)", "stop": stops, "baseline": floors, "baseline_name": "stop route round trip"})

        # 2. the same reply, background run in the qcluster worker process
        stops, floors = [], []
        for _ in range(args.tries):
            upstream.reset()
            upstream.script(long_reply())
            accepted = client.post("/v1/agents/bench/run", json={"input": "talk", "background": True}).json()
            wait(lambda: upstream.streams and upstream.streams[0].sent >= 3, timeout=120)
            t0 = time.perf_counter()
            answer = client.post(f"/v1/agents/sessions/{accepted['sessionId']}/stop", json={})
            floors.append(time.perf_counter() - t0)
            refused[answer.status_code] = refused.get(answer.status_code, 0) + (answer.status_code != 200)
            wait(lambda: run_status(slug, accepted["runId"]) == "error", timeout=60)
            stops.append(time.perf_counter() - t0)
        results.append({"case": "background run in a qcluster process", "stop": stops, "baseline": floors,
                        "baseline_name": "stop route round trip"})

        # 4. a routed run: `python -m runner` claims it, its model call (30 s) is in flight
        results.append(routed_case(args, upstream, slug, key, server, client))
    finally:
        client.close()
        cluster.stop()
        server.stop()
    return results


def routed_case(args, upstream, slug: str, key: str, server, client) -> dict:
    from tests.runner.conftest import RunnerProcess
    from tests.support.upstream import Reply

    work = Path(tempfile.mkdtemp(prefix="agents-bench-runner-"))
    runner = RunnerProcess(server=server.url, api_key=key, key_dir=work / "keys", log=work / "runner.log",
                           env={"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench"}).start()
    stops, floors = [], []
    try:
        runner.wait_for("claim key minted", timeout=600)
        target = client.get("/v1/agents/targets").json()["targets"][0]["id"]
        for _ in range(args.tries):
            upstream.reset()
            upstream.script(Reply(delay=30, content="too late"))
            accepted = client.post("/v1/agents/bench/run", json={"input": "talk", "targetId": target})
            assert accepted.status_code == 202, accepted.text
            body = accepted.json()
            wait(lambda: upstream.chat_requests, timeout=120)
            t0 = time.perf_counter()
            answer = client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", json={})
            floors.append(time.perf_counter() - t0)
            refused[answer.status_code] = refused.get(answer.status_code, 0) + (answer.status_code != 200)
            wait(lambda: run_status(slug, body["runId"] if "runId" in body else body["id"]) == "error", timeout=60)
            stops.append(time.perf_counter() - t0)
    finally:
        runner.terminate(timeout=30)
    return {"case": "routed run (python -m runner)", "stop": stops, "baseline": floors, "baseline_name": "stop route round trip"}


def command_case(args) -> dict:
    from toolkit.coding import ToolBox
    from toolkit.sandbox import BubblewrapSandbox, CommandCancelled, Limits
    from toolkit.stopping import StopSignal, run_stoppable

    sandbox = BubblewrapSandbox()
    if not sandbox.available():
        return {"case": "60 s sandboxed command", "skipped": sandbox.unavailable_reason()}
    work = Path(tempfile.mkdtemp(prefix="agents-bench-stop-"))
    box = ToolBox(root=work, sandbox=sandbox, limits=Limits(timeout_seconds=120))
    stops, floors = [], []
    for _ in range(args.tries):
        stop = StopSignal()
        out: dict = {}

        def call():
            try:
                run_stoppable(lambda: box.acall("run", '{"command": "touch started; sleep 60"}'), stop)
            except CommandCancelled:
                out["at"] = time.perf_counter()

        (work / "started").unlink(missing_ok=True)
        thread = threading.Thread(target=call, daemon=True)
        thread.start()
        wait(lambda: (work / "started").exists(), timeout=60)
        time.sleep(0.05)
        t0 = time.perf_counter()
        stop.set({"command": "stop"})
        thread.join(60)
        stops.append(out["at"] - t0)
        # baseline: the floor of killing a process group and reaping it
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        time.sleep(0.05)
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        floors.append(time.perf_counter() - t0)
    return {"case": "60 s sandboxed command (bubblewrap)", "stop": stops, "baseline": floors, "baseline_name": "SIGKILL + reap of a plain process group"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="agents-bench-stop-")
    slug, key = setup_site(data_dir)

    from tests.support.upstream import Upstream

    upstream = Upstream().start()
    base_env = {"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": "test-model"}
    os.environ.update(base_env)
    from agents.services import AgentInput, agent_create
    from tenancy import stores

    with stores.org_context(slug):
        agent_create(data=AgentInput(name="bench", instructions="Answer briefly."))

    print(f"stop → run terminal, {args.tries} tries each (ms); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    print(f"{'case':42} {'p50':>8} {'p99':>8} {'baseline p50':>13} {'baseline p99':>13} {'p99 ratio':>10}", flush=True)
    show(command_case(args))
    for result in streamed_cases(args, upstream, slug, key, base_env):
        show(result)
    upstream.stop()
    print(f"load average at the end {os.getloadavg()[0]:.1f}; stop answers other than 200: {refused or 'none'}", flush=True)


def show(result: dict) -> None:
    if "skipped" in result:
        print(f"{result['case']:42} skipped: {result['skipped']}", flush=True)
        return
    s, b = result["stop"], result["baseline"]
    print(f"{result['case']:42} {pct(s, .5) * 1000:8.0f} {pct(s, .99) * 1000:8.0f} {pct(b, .5) * 1000:13.1f} {pct(b, .99) * 1000:13.1f}"
          f" {pct(s, .99) / max(pct(b, .99), 1e-9):10.1f}   (baseline: {result['baseline_name']})", flush=True)


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
