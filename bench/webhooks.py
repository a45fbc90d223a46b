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

    .venv/bin/python bench/webhooks.py [--requests 200] [--latency-ms 300] [--block 10] [--receivers-in-process]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="runs per arm (with and without) for the instant upstream")
    parser.add_argument("--latency-ms", type=int, default=300)
    parser.add_argument("--block", type=int, default=10, help="runs per alternating block")
    parser.add_argument("--receivers-in-process", action="store_true",
                        help="serve the receivers on threads of this process (the arrangement of the figures before 2026-12-02 17:15)")
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
