"""The parts of the soak (issue 51 item 3), shared by `make soak` (bench/soak.py) and the
kill-and-restart test of the PostgreSQL pass (tests/runs/test_kill_and_restart.py).

* `Process`: one daphne or django-q2 cluster of a deployment, in a process group of its own, its
  output appended to one log across restarts; `kill()` is SIGKILL to the group (a crash),
  `start()` brings it back (a daphne on the same port).
* `Receiver`: a loopback webhook receiver that verifies each request (`standardwebhooks`) and
  records every `webhook-id` with the wall-clock times it arrived.
* `SlowDemo`: the demo gateway (model `demo`: echoes, `/tool NAME {json}` calls a tool) answering
  after a model's latency, so kills and stops find runs in flight.
* `Tally`: every answer the clients got, by operation and status; an answer no client should
  ever get (≥ 500, except a 503 with `Retry-After` and a failed run's 502 whose body is the run)
  kept with its body; connection resets and timeouts (a killed process) counted apart.
* `invariants(...)` reads the stores (Django set up for the deployment) and returns what the
  soak promises; `violations(...)` says which promise failed.
* `log_problems(paths)`: the lines of the processes' logs that report a fault.
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from demo_gateway.server import Upstream

ROOT = Path(__file__).resolve().parents[2]

#: The log format the soak's processes write (`AGENTS_LOG_FORMAT`): the level first, so a fault is found by it.
LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"


class Process:
    """One daphne (`kind="daphne"`, on `port`) or `manage.py qcluster` of a deployment."""

    def __init__(self, kind: str, env: dict, log_path: Path, *, port: int | None = None, name: str = "") -> None:
        self.kind, self.env, self.log_path, self.port = kind, env, Path(log_path), port
        self.name = name or kind
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Process:
        """Start the process (returns at once; `ready()` waits for a daphne to answer)."""
        if self.kind == "daphne":
            args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "server.asgi:application"]
        else:
            args = [sys.executable, "manage.py", "qcluster"]
        with open(self.log_path, "ab") as log:
            log.write(f"=== soak: {self.name} start {self.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        return self

    def ready(self, timeout: float = 120.0) -> bool:
        """Wait until a daphne answers HTTP (a cluster: until its process runs); return whether it did."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            if self.kind != "daphne":
                return True
            try:
                httpx.get(self.url + "/favicon.ico", timeout=5)
                return True
            except httpx.HTTPError:
                time.sleep(0.1)
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the process and its whole group (a cluster's workers too), as a crash would."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)
        with open(self.log_path, "ab") as log:
            log.write(f"=== soak: {self.name} killed at {time.time():.3f}\n".encode())

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully (SIGTERM); kill whatever of the group is left after `timeout` s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=30)


class Receiver:
    """A loopback webhook receiver: verifies each request with the secret of its path (when known)
    and records every `webhook-id` with the wall-clock times it arrived; answers 204."""

    def __init__(self) -> None:
        self.received: dict[str, list[float]] = collections.defaultdict(list)
        self.secrets: dict[str, str] = {}  # path → whsec_… of the endpoint it belongs to
        self.failed_verification = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                from standardwebhooks import Webhook

                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                secret = receiver.secrets.get(self.path)
                verified = True
                if secret:
                    try:
                        Webhook(secret).verify(body, headers)
                    except Exception:  # noqa: BLE001 - counted, reported by the soak
                        verified = False
                with receiver.lock:
                    receiver.received[headers.get("webhook-id", "")].append(time.time())
                    receiver.failed_verification += not verified
                self.send_response(204)
                self.end_headers()

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a sender killed mid-request (the soak's kills): nothing to report

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self) -> dict[str, list[float]]:
        with self.lock:
            return {k: list(v) for k, v in self.received.items()}


class SlowDemo(Upstream):
    """The demo gateway answering after a model's latency (`latency`: seconds, uniform); its
    request log kept short (a soak makes thousands)."""

    def __init__(self, latency: tuple[float, float] = (0.05, 0.8)) -> None:
        super().__init__(demo=True)
        self.latency = latency

    def start(self, **kwargs) -> SlowDemo:
        super().start(**kwargs)
        self.server.handle_error = lambda request, client_address: None  # a caller killed mid-request (the soak's kills)
        return self

    def _next(self, body: dict):
        reply = super()._next(body)
        reply.delay = random.uniform(*self.latency)
        if reply.chunks:
            reply.chunk_delay = 0.01
        with self._lock:
            for kept in (self.requests, self.request_headers, self.arrivals):
                del kept[:-50]
        return reply


@dataclass
class Tally:
    """What the clients were answered (see the module doc)."""

    answers: collections.Counter = field(default_factory=collections.Counter)  # (op, status) → n
    unexpected: list = field(default_factory=list)  # (op, status, body) of a ≥ 500 no client should get
    resets: collections.Counter = field(default_factory=collections.Counter)  # op → connections lost (a process killed)
    timeouts: collections.Counter = field(default_factory=collections.Counter)
    busy: int = 0  # 503 with Retry-After
    failed_runs: int = 0  # 502 whose body is the (failed) run
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, op: str, status: int, *, headers=None, body: bytes = b"") -> None:
        """Count one answer; keep it when it is ≥ 500 and not an expected one."""
        with self.lock:
            self.answers[(op, status)] += 1
            if status < 500:
                return
            if status == 503 and headers is not None and headers.get("retry-after"):
                self.busy += 1
                return
            if status == 502 and _is_failed_run(body):
                self.failed_runs += 1
                return
            self.unexpected.append((op, status, body[:300].decode("utf-8", "replace")))

    def reset(self, op: str) -> None:
        with self.lock:
            self.resets[op] += 1

    def timeout(self, op: str) -> None:
        with self.lock:
            self.timeouts[op] += 1

    def total(self) -> int:
        return sum(self.answers.values())


def _is_failed_run(body: bytes) -> bool:
    import json

    try:
        run = json.loads(body)
    except ValueError:
        return False
    return isinstance(run, dict) and str(run.get("id", "")).startswith("run_") and run.get("status") == "error"


_FAULT = re.compile(r"Traceback \(most recent call last\)|Internal Server Error|^(ERROR|CRITICAL) ")


def log_problems(paths) -> list[str]:
    """Return `path: line` for every line of the logs at `paths` that reports a fault (a
    traceback, Django's uncaught-exception line, a record at ERROR or CRITICAL)."""
    found = []
    for path in paths:
        text = Path(path).read_text(errors="replace") if Path(path).exists() else ""
        found += [f"{Path(path).name}: {line}" for line in text.splitlines() if _FAULT.search(line)]
    return found


def invariants(slugs: list[str], *, received: dict[str, list[float]], kills: list[float], since=None) -> dict:
    """Read the deployment's stores and return what the soak promises (Django set up for it).

    `received`: webhook-id → arrival times (`Receiver.snapshot()`); `kills`: wall-clock times a
    process was killed. `since`: only django-q2 task failures from then on. Returns a dict of
    counts and, for each promise, what breaks it (empty lists when it holds).
    """
    from django.db import connections
    from django.db.models import Count, F, Max, Min, Sum

    from billing.models import Account, LedgerEntry
    from runs.models import Run
    from sessions.models import Event
    from tenancy import stores
    from tenancy.models import Org
    from webhooks.models import EventDelivery

    report: dict = {"runs": collections.Counter(), "nonTerminal": [], "balance": [], "billing": [], "deliveries": collections.Counter(),
                    "deliveryTwice": [], "deliveryOpen": [], "deadWithoutReason": [], "succeededNotReceived": [], "seqGaps": [],
                    "positionGaps": [], "taskFailures": []}
    debits = collections.defaultdict(list)
    for org in Org.objects.filter(slug__in=slugs):
        entries = LedgerEntry.objects.filter(org=org)
        ledger = entries.aggregate(total=Sum("amount_cents"))["total"] or 0
        balance = Account.objects.filter(org=org).values_list("balance_cents", flat=True).first() or 0
        if balance != ledger:
            report["balance"].append(f"{org.slug}: balance {balance} ≠ ledger {ledger}")
        for run_id in entries.filter(kind="agent").values_list("run_id", flat=True):
            debits[(org.slug, run_id)].append(run_id)
    for slug in slugs:
        with stores.org_context(slug, create=False):
            for run in Run.objects.only("id", "status", "kind", "fee_cents", "error"):
                report["runs"][run.status] += 1
                if run.status not in ("ok", "error"):
                    report["nonTerminal"].append(f"{slug} {run.id} {run.kind} {run.status}")
                charged = len(debits.get((slug, run.id), []))
                if run.status == "ok" and run.fee_cents and charged != 1:
                    report["billing"].append(f"{slug} {run.id} ok, debited {charged}×")
                elif run.status != "ok" and charged:
                    report["billing"].append(f"{slug} {run.id} {run.status}, debited {charged}×")
            for row in EventDelivery.objects.values("event_id", "endpoint_id").annotate(n=Count("id")).filter(n__gt=1):
                report["deliveryTwice"].append(f"{slug} event {row['event_id']} endpoint {row['endpoint_id']}: {row['n']} rows")
            for delivery in EventDelivery.objects.only("public_id", "status", "last_error"):
                report["deliveries"][delivery.status] += 1
                if delivery.status in ("pending", "retrying"):
                    report["deliveryOpen"].append(f"{slug} {delivery.public_id} {delivery.status}")
                elif delivery.status == "dead" and not delivery.last_error:
                    report["deadWithoutReason"].append(f"{slug} {delivery.public_id}")
                elif delivery.status == "succeeded" and delivery.public_id not in received:
                    report["succeededNotReceived"].append(f"{slug} {delivery.public_id}")
            gaps = (Event.objects.values("session_id").annotate(n=Count("id"), low=Min("seq"), high=Max("seq"))
                    .exclude(low=1, high=F("n")))
            report["seqGaps"] += [f"{slug} session {g['session_id']}: {g['n']} events, seq {g['low']}..{g['high']}" for g in gaps]
            positions = Event.objects.aggregate(n=Count("id"), placed=Count("position"), low=Min("position"), high=Max("position"))
            if positions["n"] and (positions["placed"] != positions["n"] or positions["low"] != 1 or positions["high"] != positions["n"]):
                report["positionGaps"].append(f"{slug}: {positions}")
        connections.close_all()
    duplicates = {k: v for k, v in received.items() if len(v) > 1}
    unexplained = [k for k, times in duplicates.items() if not any(min(times) - 1 <= kill <= max(times) for kill in kills)]
    report.update(webhookIds=len(received), duplicates=len(duplicates), duplicatesUnexplained=unexplained)
    from django_q.models import Failure

    failures = Failure.objects.all()
    if since is not None:
        failures = failures.filter(stopped__gte=since)
    report["taskFailures"] = [f"{f.func} {str(f.result)[:200]}" for f in failures]
    report["runs"] = dict(report["runs"])
    report["deliveries"] = dict(report["deliveries"])
    return report


#: The promises `violations` checks, with the report keys that hold what breaks each.
PROMISES = [
    ("every run terminal", "nonTerminal"),
    ("every org's balance = the sum of its ledger", "balance"),
    ("every ok run with a fee debited once, no other run debited", "billing"),
    ("one delivery row per (event, endpoint)", "deliveryTwice"),
    ("no delivery left open", "deliveryOpen"),
    ("every dead delivery has a reason", "deadWithoutReason"),
    ("every succeeded delivery's webhook-id received", "succeededNotReceived"),
    ("duplicates only after a kill", "duplicatesUnexplained"),
    ("event seq dense per session", "seqGaps"),
    ("event positions dense per org", "positionGaps"),
    ("0 task failures", "taskFailures"),
]


def violations(report: dict, tally: Tally | None = None, problems: list[str] | None = None) -> list[str]:
    """Return one line per broken promise of `report` (and of the answers and logs), [] when all hold."""
    broken = [f"{promise}: {len(report[key])} — {report[key][:5]}" for promise, key in PROMISES if report[key]]
    if tally is not None and tally.unexpected:
        broken.append(f"0 answers ≥ 500 but 503+Retry-After and failed runs' 502: {len(tally.unexpected)} — {tally.unexpected[:5]}")
    if problems:
        broken.append(f"0 faults in the logs: {len(problems)} — {problems[:5]}")
    return broken
