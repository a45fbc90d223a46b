"""Benchmark: does a run get slower when its org subscribes webhook endpoints, one of them stalled?

Starts the loopback OpenAI-compatible upstream, a real daphne serving the site and a real
django-q2 cluster (the webhook attempts), three loopback receivers — two answering at once, one
stalled (it never answers; every attempt to it times out after AGENTS_WEBHOOK_TIMEOUT_SECONDS and
is retried), served by a child process of their own (a customer's endpoint is not in the
client's process: in this one its threads took the GIL from the thread timing the runs;
`--receivers-in-process` keeps the earlier arrangement) — and measures `POST /v1/agents/{ref}/run` (sync) in alternating blocks: without
endpoints, then with the three subscribed to `run.finished` (enabled/disabled through
PATCH /v1/agents/webhooks/{id} between blocks), so drift hits both alike. Reported: p50/p99 of
each and the ratio with ÷ without, with an upstream answering at once and with a model latency.

`--part drain` (issue 52): the delivery engine alone, in this one process (its webhook threads,
the org store on SQLite), against receivers in a child process — each row printed as measured ÷
its limit (≤ 1.00 meets it):

* 1,000 deliveries due at once to one healthy receiver answering after 20 ms: until all succeeded
  (limit 15 s);
* 200 deliveries to the healthy receiver handed on at 20/s, alone and beside a receiver that holds
  every request 60 s (10 of its deliveries handed on first; each attempt times out at
  `AGENTS_WEBHOOK_TIMEOUT_SECONDS`, 10 s, and is retried): the healthy one's p99 delay (handed on →
  received) with − without (limit 1 s);
* a receiver answering 503 through a 3-minute outage (the engine's clock moved forward by hand,
  its timers and the minute tick running as they would) while 500 deliveries to it pile up; then
  it answers again and one new event goes to it: from then until all 501 succeeded (limit 10 s).

    .venv/bin/python bench/webhooks.py [--part runs|drain|all] [--requests 200] [--latency-ms 300] [--block 10] [--receivers-in-process]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import run_overhead  # noqa: E402  (sets the bench environment: fresh data dir, the site's settings)
from run_overhead import MODEL, PROMPT, percentile, provision, timed  # noqa: E402

sys.path.insert(0, str(ROOT))


class Receiver:
    """A loopback receiver: answers 204 at once, or (stalled) holds every request open for `stall` seconds."""

    def __init__(self, stall: float = 0.0) -> None:
        self.count = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.count += 1
                if stall:
                    time.sleep(stall)
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"


RECEIVERS_CHILD = r"""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
counts = [0, 0, 0]
def serve(index, stall):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass
        def do_GET(self):
            body = json.dumps(counts).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            counts[index] += 1
            if stall:
                time.sleep(stall)
            self.send_response(204)
            self.end_headers()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]
print(" ".join(str(serve(i, stall)) for i, stall in enumerate((0.0, 0.0, 60.0))), flush=True)
sys.stdin.read()  # until the bench closes it
"""


class ChildReceivers:
    """The three receivers (fast, fast, stalled) in a child process; `urls`, `counts()`, `stop()`."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", RECEIVERS_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        self.ports = [int(p) for p in self.process.stdout.readline().split()]
        self.urls = [f"http://127.0.0.1:{port}/hook" for port in self.ports]

    def counts(self) -> list[int]:
        import httpx

        return json.loads(httpx.get(f"http://127.0.0.1:{self.ports[0]}/counts", timeout=10).text)

    def stop(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


DRAIN_CHILD = r"""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
log = {"healthy": [], "hanging": [], "flaky": []}
flaky_up = [False]
lock = threading.Lock()
def serve(name, latency):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keeps a connection open between requests, as a receiver's web server does
        def log_message(self, *args):
            pass
        def do_GET(self):
            with lock:
                body = json.dumps(log).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_PUT(self):
            flaky_up[0] = self.path.endswith("/up")
            self.send_response(204)
            self.end_headers()
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            code = 503 if name == "flaky" and not flaky_up[0] else 204
            if code == 204 and latency:
                time.sleep(latency)
            with lock:
                log[name].append([self.headers.get("webhook-id"), time.time(), code])
            self.send_response(code)
            if code != 204:
                self.send_header("content-length", "0")
            self.end_headers()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]
print(" ".join(str(serve(n, l)) for n, l in (("healthy", 0.02), ("hanging", 60.0), ("flaky", 0.0))), flush=True)
sys.stdin.read()
"""


class DrainReceivers:
    """Healthy (20 ms), hanging (60 s) and flaky (503 until `up()`) receivers in a child process."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", DRAIN_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ports = [int(p) for p in self.process.stdout.readline().split()]
        self.urls = dict(zip(("healthy", "hanging", "flaky"), (f"http://127.0.0.1:{port}/hook" for port in ports)))

    def log(self) -> dict:
        import httpx

        return httpx.get(self.urls["healthy"], timeout=30).json()

    def flaky(self, up: bool) -> None:
        import httpx

        httpx.put(self.urls["flaky"].replace("/hook", "/up" if up else "/down"), timeout=30)

    def stop(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def drain() -> list[tuple[str, float, float, str]]:
    """The engine's rows of issue 52 in this process; return (row, measured, limit, unit) each."""
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from agents_site.vocabulary import DeliveryStatus
    from tenancy import stores
    from webhooks import engine, services, tasks
    from webhooks.models import Endpoint, EventDelivery

    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    settings.AGENTS_WEBHOOK_THREADS = 4
    settings.AGENTS_WEBHOOK_TIMEOUT_SECONDS = 10.0
    engine.enqueue = lambda org, channel_name, ids: engine.dispatch(org, channel_name, list(ids))  # one process: no task queue
    receivers = DrainReceivers()
    rows = []
    try:
        with stores.org_context("bench"):
            endpoints = {}
            for name, url in receivers.urls.items():
                endpoint, _ = services.endpoint_create(data=services.EndpointInput(url=url, events=["run.finished"]), actor="bench")
                endpoints[name] = Endpoint.objects.get(pk=endpoint.pk)

            def write(name: str, n: int) -> list[str]:
                made = services.deliveries_create(endpoints_and_urls=[(endpoints[name], endpoints[name].url)] * n,
                                                  event_type="webhook.test", data={"bench": name}, enqueue=False)
                return [row.public_id for row in made]

            def open_count(ids) -> int:
                return EventDelivery.objects.filter(public_id__in=ids, status__in=DeliveryStatus.OPEN).count()

            # 1. 1,000 due at once to one healthy 20 ms receiver.
            ids = write("healthy", 1000)
            started = time.monotonic()
            engine.dispatch("bench", "org", ids)
            engine.idle(timeout=600)
            took = time.monotonic() - started
            assert open_count(ids) == 0, "deliveries left open"
            rows.append(("1,000 deliveries due at once to one healthy 20 ms receiver: all succeeded", took, 15.0, "s"))

            # 2. A steady stream to the healthy receiver, alone and beside a hanging one.
            def stream(n: int = 200, rate: float = 20.0) -> list[float]:
                handed = {}
                for _ in range(n):
                    [one] = write("healthy", 1)
                    handed[one] = time.time()
                    engine.dispatch("bench", "org", [one])
                    time.sleep(1 / rate)  # the stream's pace (a bench, not a test)
                deadline = time.monotonic() + 120
                while open_count(list(handed)) and time.monotonic() < deadline:
                    engine.idle(timeout=0.2)
                got = {wid: t for wid, t, code in receivers.log()["healthy"] if wid in handed and code == 204}
                return [(got[wid] - handed[wid]) * 1000 for wid in handed if wid in got]

            alone = stream()
            engine.dispatch("bench", "org", write("hanging", 10))
            beside = stream()
            p99_alone, p99_beside = percentile(alone, 99), percentile(beside, 99)
            rows.append((f"healthy receiver's p99 delay beside one hanging 60 s (alone {p99_alone:.0f} ms, beside {p99_beside:.0f} ms): "
                         "beside − alone", max(0.0, (p99_beside - p99_alone) / 1000), 1.0, "s"))
            Endpoint.objects.filter(pk=endpoints["hanging"].pk).update(enabled=False)
            EventDelivery.objects.filter(endpoint=endpoints["hanging"]).update(status=DeliveryStatus.DEAD, next_attempt_at=None)  # not retried later

            # 3. A backlog of 500 over a 3-minute outage, then the receiver answers again.
            offset = [0.0]
            engine.set_clock(lambda: timezone.now() + timedelta(seconds=offset[0]))
            try:
                backlog, step = [], 180.0 / 500
                for i in range(500):
                    backlog += write("flaky", 1)
                    engine.dispatch("bench", "org", backlog[-1:])
                    offset[0] += step
                    if i % 167 == 166:  # the minute tick, about every simulated minute
                        tasks.due_tick()
                engine.idle(timeout=120)
                waiting = EventDelivery.objects.filter(public_id__in=backlog, status=DeliveryStatus.RETRYING).count()
                receivers.flaky(True)
                started = time.monotonic()
                fresh = write("flaky", 1)
                engine.dispatch("bench", "org", fresh)
                deadline = time.monotonic() + 300
                while open_count(backlog + fresh) and time.monotonic() < deadline:
                    engine.idle(timeout=0.2)
                took = time.monotonic() - started
                left = open_count(backlog + fresh)
            finally:
                engine.set_clock(None)
            rows.append((f"a backlog of 500 after a 3-minute outage ({waiting} retrying, {left} left open): the receiver "
                         "answers → all succeeded", took, 10.0, "s"))
    finally:
        engine.reset()
        receivers.stop()
    return rows


def print_drain(rows) -> None:
    print(f"\nThe delivery engine in one process (4 webhook threads, at most {2} in flight per origin), org store on SQLite, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}:\n")
    print(f"{'row':<120}{'measured':>10}{'limit':>8}{'ratio':>8}")
    for label, measured, limit, unit in rows:
        print(f"{label:<120}{measured:>9.2f}{unit}{limit:>7.0f}{unit}{measured / limit:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="runs per arm (with and without) for the instant upstream")
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--block", type=int, default=10, help="runs per alternating block")
    parser.add_argument("--receivers-in-process", action="store_true",
                        help="serve the receivers on threads of this process (the arrangement of the figures before 2026-12-02 17:15)")
    parser.add_argument("--part", choices=("runs", "drain", "all"), default="all",
                        help="runs: a run with endpoints ÷ without; drain: the engine's drain rows (issue 52)")
    args = parser.parse_args()
    if args.part == "drain":
        provision()
        print_drain(drain())
        return

    import httpx

    from tests.support.live import LiveServer
    from tests.support.qcluster import QCluster
    from tests.support.upstream import Upstream

    upstream = Upstream().start()
    upstream.models = [MODEL]
    _, key = provision()
    if args.receivers_in_process:
        receivers = [Receiver(), Receiver(), Receiver(stall=60.0)]
        urls, child = [r.url for r in receivers], None
    else:
        child = ChildReceivers()
        urls = child.urls
    env = {"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": MODEL,
           "AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1", "AGENTS_WEBHOOK_TIMEOUT_SECONDS": "10"}
    server = LiveServer(env).start()
    cluster = QCluster(env).start()
    try:
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        assert http.post("/v1/agents", json={"name": "bench", "model": MODEL, "instructions": "Answer in one sentence."}).status_code == 201
        ids = []
        for url in urls:
            created = http.post("/v1/agents/webhooks", json={"url": url, "events": ["run.finished"], "enabled": False})
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])

        def switch(on: bool) -> None:
            for endpoint_id in ids:
                assert http.patch(f"/v1/agents/webhooks/{endpoint_id}", json={"enabled": on}).status_code == 200

        def run():
            response = http.post("/v1/agents/bench/run", json={"input": PROMPT})
            assert response.status_code == 200, response.text

        results = {}
        for label, latency in (("answers at once", 0.0), (f"{args.latency_ms} ms model latency", args.latency_ms / 1000)):
            upstream.default_delay = latency
            n = args.requests if latency == 0 else max(args.requests // 4, 40)
            timed(run, 10)
            without, with_hooks = [], []
            while len(without) < n:
                switch(False)
                without += timed(run, args.block)
                switch(True)
                with_hooks += timed(run, args.block)
            results[label] = (len(without), without, with_hooks)
        switch(False)
        time.sleep(2)
        delivered = child.counts() if child else [r.count for r in receivers]
    finally:
        cluster.stop()
        server.stop()
        upstream.stop()
        if child:
            child.stop()

    print(f"POST /v1/agents/{{ref}}/run (sync) on daphne + a django-q2 cluster, {os.cpu_count()} CPUs, sequential;")
    print("with = 3 endpoints subscribed to run.finished, one of them stalled (never answers within the 10 s timeout);")
    print(f"receivers served by {'threads of this process' if args.receivers_in_process else 'a child process'}\n")
    print(f"{'upstream':<26}{'n':>5}{'without p50':>13}{'with p50':>10}{'without p99':>13}{'with p99':>10}{'ratio p50':>11}{'ratio p99':>11}")
    for label, (n, without, with_hooks) in results.items():
        a50, b50, a99, b99 = percentile(without, 50), percentile(with_hooks, 50), percentile(without, 99), percentile(with_hooks, 99)
        print(f"{label:<26}{n:>5}{a50:>11.2f}ms{b50:>8.2f}ms{a99:>11.2f}ms{b99:>8.2f}ms{b50 / a50:>10.3f}x{b99 / a99:>10.3f}x")
    print(f"\nrequests the receivers got (fast, fast, stalled): {delivered}")
    if args.part == "all":
        print_drain(drain())


if __name__ == "__main__":
    main()
