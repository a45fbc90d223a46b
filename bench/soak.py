"""`make soak`: the scale-out mode under chaos (issue 51 item 3).

A deployment on PostgreSQL + Redis — two daphnes, two django-q2 clusters (`manage.py
qcluster`), the minute schedules installed — serves `--clients` clients doing random valid
operations for `--minutes`: create, change and delete agents and webhook endpoints; sync,
background and streamed runs and chat rounds; stops; runs that ask for approval, answered
(approve or deny) or left to time out; event appends; session streams read and dropped. Meanwhile
a random daphne or cluster is SIGKILLed about every `--kill-every` seconds and started again.
Then the clients stop, the deployment settles (every run ends, every delivery is settled) and
the invariants are checked and printed:

- every run terminal; every org's balance = the sum of its ledger (and every ok run with a fee
  debited exactly once, no other run debited);
- one delivery row per (event, endpoint); every succeeded delivery's `webhook-id` received at
  least once, every dead one with a reason; duplicates only after a kill, counted;
- event seq dense per session, positions dense per org;
- 0 answers ≥ 500 except a 503 with `Retry-After` (and a failed run's 502, whose body is the run);
  connection resets from a killed process retried by the client and counted apart;
- 0 django-q2 task failures, and 0 faults (tracebacks, ERROR lines) in the processes' logs.

    .venv/bin/python bench/soak.py --minutes 30
    make soak SOAK_MINUTES=10

Short clocks make a soak of minutes see what production sees in hours: a 8 s run lease, a 20 s
approval timeout, webhook retries at 1/50 of the schedule and given up after 90 s. Needs
PostgreSQL (`--postgres`, trust auth) and Redis (`--redis`; its database is flushed). Everything
is made under names of this run (`ags_{pid}_…`) and dropped at the end (`--keep` keeps it).
Exit status 1 when a promise is broken.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.soak import LOG_FORMAT, Process, Receiver, SlowDemo, Tally, log_problems, violations  # noqa: E402

RUN = f"ags_{os.getpid()}"

SETUP = """
import django, json, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
call_command("ensure_schedules", verbosity=0)
from billing.services import credit_add
from tenancy.services import api_key_create, membership_set, org_create
keys = {}
for n in range(int(sys.argv[1])):
    org = org_create(slug=f"soak{n}", name="soak")
    membership = membership_set(org=org, username=f"soak{n}", password="soak-soak-soak", is_admin=True)
    credit_add(org=org, cents=10_000_000, actor="soak")
    keys[org.slug] = api_key_create(org=org, user=membership.user)[1]
print(json.dumps(keys))
"""

CHECK = """
import django, json, sys
django.setup()
from datetime import datetime, timezone
from tests.support.soak import invariants
args = json.load(open(sys.argv[1]))
since = datetime.fromtimestamp(args["since"], tz=timezone.utc)
print(json.dumps(invariants(args["slugs"], received=args["received"], kills=args["kills"], since=since), default=str))
"""

OPEN = """
import django, json, sys
django.setup()
from runs.models import Run
from tenancy import stores
from webhooks.models import EventDelivery
out = {"runs": 0, "deliveries": 0}
for slug in sys.argv[1:]:
    with stores.org_context(slug, create=False):
        out["runs"] += Run.objects.exclude(status__in=["ok", "error"]).count()
        out["deliveries"] += EventDelivery.objects.filter(status__in=["pending", "retrying"]).count()
print(json.dumps(out))
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Deployment:
    """The soak's deployment: databases, Redis, the gateway, the receiver and four processes."""

    def __init__(self, args) -> None:
        import psycopg

        self.args = args
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{RUN}-"))
        self.upstream = SlowDemo().start()
        self.receiver = Receiver().start()
        self.server = args.postgres
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{RUN}_default"')
        import redis

        redis.Redis.from_url(args.redis).flushdb()
        base = args.postgres.rsplit("/", 1)[0]
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("AGENTS_ORG_DATABASE_SERVERS",)},
            "DJANGO_SETTINGS_MODULE": "agents_site.settings", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
            "AGENTS_DATA_DIR": str(self.data_dir), "DJANGO_SECRET_KEY": f"soak-{RUN}-{'x' * 40}",
            "DATABASE_URL": f"{base}/{RUN}_default", "AGENTS_ORG_DATABASE": "postgres", "AGENTS_ORG_DATABASE_PREFIX": f"{RUN}_org_",
            "REDIS_URL": args.redis,
            "INFERENCE_BASE_URL": self.upstream.base_url, "INFERENCE_API_KEY": "soak", "AGENTS_DEFAULT_MODEL": "demo",
            "CLOUD_AGENT_FEE_CENTS": "1",
            "AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1", "AGENTS_WEBHOOK_RETRY_SCALE": "0.02", "AGENTS_WEBHOOK_GIVE_UP_SECONDS": "90",
            "AGENTS_RUN_LEASE_SECONDS": "8", "AGENTS_QUEUED_MAX_SECONDS": "120", "AGENTS_APPROVAL_TIMEOUT_SECONDS": "20",
            "AGENTS_LOG_LEVEL": "WARNING", "AGENTS_LOG_FORMAT": LOG_FORMAT,
            **dict(item.split("=", 1) for item in args.env),
        }
        out = self.django(SETUP, str(args.orgs))
        self.keys: dict[str, str] = json.loads(out)
        self.daphnes = [Process("daphne", self.env, self.data_dir / f"daphne-{n}.log", port=free_port(), name=f"daphne-{n}") for n in (1, 2)]
        self.clusters = [Process("qcluster", self.env, self.data_dir / f"qcluster-{n}.log", name=f"qcluster-{n}") for n in (1, 2)]

    @property
    def processes(self) -> list[Process]:
        return self.daphnes + self.clusters

    def django(self, code: str, *argv: str) -> str:
        """Run `code` in a Django process of the deployment; return its last line of output."""
        done = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, env=self.env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(done.stderr[-3000:])
        return done.stdout.strip().splitlines()[-1]

    def start(self) -> None:
        for proc in self.processes:
            proc.start()
        for proc in self.processes:
            if not proc.ready():
                raise RuntimeError(f"{proc.name} did not start: {proc.log_path.read_text()[-2000:]}")

    def close(self) -> None:
        for proc in self.processes:
            proc.stop()
        self.upstream.stop()
        self.receiver.stop()
        if self.args.keep:
            print(f"# kept: {self.data_dir}, databases {RUN}_*")
            return
        import psycopg
        import redis

        with psycopg.connect(self.server, autocommit=True) as conn:
            for (name,) in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (RUN,)).fetchall():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        redis.Redis.from_url(self.args.redis).flushdb()
        shutil.rmtree(self.data_dir, ignore_errors=True)


# --- the clients --------------------------------------------------------------------------------

WEIGHTS = {
    "sync_run": 18, "background_run": 10, "stream_run": 8, "chat": 8, "append": 14, "stream_read": 4, "agent_create": 3,
    "agent_patch": 4, "agent_delete": 2, "webhook_create": 2, "webhook_delete": 2, "stop": 6, "approval_run": 5,
    "approval_answer": 5, "poll_run": 4,
}


class Client:
    """One client of one org: random valid operations over both daphnes, its own objects remembered."""

    def __init__(self, n: int, slug: str, key: str, deployment: Deployment, tally: Tally) -> None:
        self.n, self.slug, self.deployment, self.tally = n, slug, deployment, tally
        self.headers = {"Authorization": f"Bearer {key}"}
        self.agents: list[str] = []
        self.endpoints: list[str] = []
        self.sessions: list[str] = []
        self.runs: collections.deque = collections.deque(maxlen=20)  # (run id, session id) of background runs
        self.waiting: list[tuple[str, str]] = []  # (session id, tool call id) of runs waiting for approval
        self.made = 0

    def _base(self) -> str:
        return random.choice(self.deployment.daphnes).url

    async def call(self, http, op: str, method: str, path: str, body: dict | None = None):
        """Send one request (to either daphne), retrying a lost connection (a killed process) on
        another try; count the answer. Returns the response, or None when every try was lost."""
        import httpx

        for _ in range(6):
            try:
                response = await http.request(method, self._base() + path, json=body, headers=self.headers)
            except httpx.TimeoutException:
                self.tally.timeout(op)
                return None
            except httpx.TransportError:
                self.tally.reset(op)
                await asyncio.sleep(0.5)
                continue
            self.tally.record(op, response.status_code, headers=response.headers, body=response.content)
            return response
        return None

    async def step(self, http) -> None:
        op = random.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        await getattr(self, op)(http, op)

    def _name(self, prefix: str) -> str:
        self.made += 1
        return f"c{self.n}-{prefix}{self.made}"

    async def _agent(self, http) -> str | None:
        if not self.agents:
            await self.agent_create(http, "agent_create")
        return random.choice(self.agents) if self.agents else None

    async def agent_create(self, http, op) -> None:
        name = self._name("a")
        response = await self.call(http, op, "POST", "/v1/agents", {"name": name, "tools": ["calculator"], "instructions": "be brief"})
        if response is not None and response.status_code == 201:
            self.agents.append(name)

    async def agent_patch(self, http, op) -> None:
        name = await self._agent(http)
        if name:
            await self.call(http, op, "PATCH", f"/v1/agents/{name}", {"instructions": f"be brief {random.random():.3f}"})

    async def agent_delete(self, http, op) -> None:
        if len(self.agents) > 2:
            name = self.agents.pop(random.randrange(len(self.agents)))
            await self.call(http, op, "DELETE", f"/v1/agents/{name}")

    async def webhook_create(self, http, op) -> None:
        if len(self.endpoints) >= 3:
            return
        path = f"/hook/{self.slug}/{self._name('w')}"
        response = await self.call(http, op, "POST", "/v1/agents/webhooks", {"url": self.deployment.receiver.url(path), "events": ["run.finished"]})
        if response is not None and response.status_code == 201:
            self.deployment.receiver.secrets[path] = response.json()["secret"]
            self.endpoints.append(response.json()["id"])

    async def webhook_delete(self, http, op) -> None:
        if self.endpoints:
            await self.call(http, op, "DELETE", f"/v1/agents/webhooks/{self.endpoints.pop(random.randrange(len(self.endpoints)))}")

    async def sync_run(self, http, op) -> None:
        name = await self._agent(http)
        if name:
            await self.call(http, op, "POST", f"/v1/agents/{name}/run", {"input": f"hello {random.randrange(1000)}"})

    async def background_run(self, http, op) -> None:
        name = await self._agent(http)
        if not name:
            return
        response = await self.call(http, op, "POST", f"/v1/agents/{name}/run", {"input": "in the background", "background": True})
        if response is not None and response.status_code == 202:
            self.runs.append((response.json()["runId"], response.json().get("sessionId")))

    async def stream_run(self, http, op) -> None:
        import httpx

        name = await self._agent(http)
        if not name:
            return
        drop = random.random() < 0.3
        try:
            async with http.stream("POST", self._base() + f"/v1/agents/{name}/run", json={"input": "stream me a reply", "stream": True},
                                   headers=self.headers) as response:
                self.tally.record(op, response.status_code, headers=response.headers)
                lines = 0
                async for _ in response.aiter_lines():
                    lines += 1
                    if drop and lines > 2:
                        break  # the client hangs up mid-stream
        except httpx.TimeoutException:
            self.tally.timeout(op)
        except httpx.TransportError:
            self.tally.reset(op)

    async def chat(self, http, op) -> None:
        await self.call(http, op, "POST", "/v1/agents/chat", {"messages": [{"role": "user", "content": f"chat {random.randrange(1000)}"}]})

    async def append(self, http, op) -> None:
        if len(self.sessions) < 3:
            response = await self.call(http, "session_create", "POST", "/v1/agents/sessions", {"agent": "soak", "title": "a soak session"})
            if response is not None and response.status_code == 201:
                self.sessions.append(response.json()["id"])
            return
        session = random.choice(self.sessions)
        await self.call(http, op, "POST", f"/v1/agents/sessions/{session}/events", {"kind": "message", "payload": {"text": "a turn"}})

    async def stream_read(self, http, op) -> None:
        import httpx

        try:
            async with http.stream("GET", self._base() + "/v1/agents/sessions/stream", headers=self.headers,
                                   timeout=httpx.Timeout(10, read=3)) as response:
                self.tally.record(op, response.status_code, headers=response.headers)
                lines = 0
                async for _ in response.aiter_lines():
                    lines += 1
                    if lines >= random.randint(1, 6):
                        break  # read a little, then drop the stream
        except httpx.TimeoutException:
            pass  # a quiet stream: dropped after its read timeout, as a client gives up
        except httpx.TransportError:
            self.tally.reset(op)

    async def stop(self, http, op) -> None:
        if self.runs:
            run_id, session_id = random.choice(list(self.runs))
            if session_id:
                await self.call(http, op, "POST", f"/v1/agents/sessions/{session_id}/stop", {"message": "soak stop"})

    async def poll_run(self, http, op) -> None:
        if self.runs:
            run_id, _ = random.choice(list(self.runs))
            await self.call(http, op, "GET", f"/v1/agents/runs/{run_id}")

    async def approval_run(self, http, op) -> None:
        name = f"c{self.n}-asker"
        if name not in self.agents:
            response = await self.call(http, "agent_create", "POST", "/v1/agents",
                                       {"name": name, "tools": ["calculator"], "approval": {"tools": ["calculator"]}})
            if response is None or response.status_code not in (201, 409):
                return
            self.agents.append(name)
        response = await self.call(http, op, "POST", f"/v1/agents/{name}/run", {"input": '/tool calculator {"expression": "2+3"}'})
        if response is not None and response.status_code == 202:
            body = response.json()
            for approval in body.get("approvals") or []:
                self.waiting.append((body["sessionId"], approval["toolCallId"]))

    async def approval_answer(self, http, op) -> None:
        if not self.waiting:
            return
        session_id, call_id = self.waiting.pop(random.randrange(len(self.waiting)))
        choice = random.random()
        if choice < 0.2:
            return  # left to time out (AGENTS_APPROVAL_TIMEOUT_SECONDS)
        answer = {"toolCallId": call_id} if choice < 0.75 else {"toolCallId": call_id, "message": "not now"}
        await self.call(http, op, "POST", f"/v1/agents/sessions/{session_id}/{'approve' if choice < 0.75 else 'deny'}", answer)


async def clients(deployment: Deployment, tally: Tally, count: int, until: float) -> int:
    """Run `count` clients until the monotonic time `until`; return the operations made."""
    import httpx

    slugs = sorted(deployment.keys)
    made = 0

    async def one(n: int) -> None:
        nonlocal made
        client = Client(n, slugs[n % len(slugs)], deployment.keys[slugs[n % len(slugs)]], deployment, tally)
        async with httpx.AsyncClient(timeout=httpx.Timeout(60, connect=5)) as http:
            while time.monotonic() < until:
                await client.step(http)
                made += 1
                await asyncio.sleep(random.uniform(0, 0.3))

    await asyncio.gather(*(one(n) for n in range(count)))
    return made


async def chaos(deployment: Deployment, every: float, until: float, kills: list[tuple[float, str]]) -> None:
    """SIGKILL a random daphne or cluster about every `every` seconds and start it again."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(random.uniform(every * 0.5, every * 1.5))
        if time.monotonic() >= until:
            return
        victim = random.choice(deployment.processes)
        kills.append((time.time(), victim.name))
        await loop.run_in_executor(None, victim.kill)
        await asyncio.sleep(random.uniform(0.5, 3.0))
        victim.start()
        await loop.run_in_executor(None, victim.ready)


def settle(deployment: Deployment, timeout: float) -> tuple[float, dict]:
    """Wait until no run is in flight and no delivery is open (the sweeps end what the kills left);
    return the seconds it took and what was still open at the end."""
    started = time.monotonic()
    left, runs_settled = {}, None
    while time.monotonic() - started < timeout:
        left = json.loads(deployment.django(OPEN, *sorted(deployment.keys)))
        if not left["runs"] and runs_settled is None:
            runs_settled = time.monotonic() - started
        if not left["runs"] and not left["deliveries"]:
            break
        time.sleep(5)
    left["runsSettledSeconds"] = None if runs_settled is None else round(runs_settled)
    return time.monotonic() - started, left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--orgs", type=int, default=2)
    parser.add_argument("--kill-every", type=float, default=45.0, help="mean seconds between two kills")
    parser.add_argument("--settle", type=float, default=300.0, help="seconds the deployment may take to settle after the clients stop")
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the databases and logs")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of every process of the deployment (repeatable), e.g. AGENTS_WEBHOOK_THREADS=0")
    args = parser.parse_args()
    random.seed(args.seed)

    print(f"# bench/soak.py — {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start; "
          f"{args.clients} clients over {args.orgs} orgs for {args.minutes:g} min, a kill about every {args.kill_every:g} s"
          + (f"; {' '.join(args.env)}" if args.env else ""))
    deployment = Deployment(args)
    tally, kills = Tally(), []
    broken: list[str] = []
    try:
        deployment.start()
        began = time.time()
        until = time.monotonic() + args.minutes * 60

        async def soak() -> int:
            chaos_task = asyncio.create_task(chaos(deployment, args.kill_every, until, kills))
            made = await clients(deployment, tally, args.clients, until)
            await chaos_task
            return made

        made = asyncio.run(soak())
        soaked = time.time() - began
        for proc in deployment.processes:  # every process up for the settling
            if not proc.alive():
                proc.start()
                proc.ready()
        settled, left = settle(deployment, args.settle)
        for proc in deployment.processes:
            proc.stop()
        check = deployment.data_dir / "check.json"
        check.write_text(json.dumps({"slugs": sorted(deployment.keys), "received": deployment.receiver.snapshot(),
                                     "kills": [t for t, _ in kills], "since": began}))
        report = json.loads(deployment.django(CHECK, str(check)))
        problems = log_problems([p.log_path for p in deployment.processes])
        broken = violations(report, tally, problems)

        print(f"soaked {soaked / 60:.1f} min: {made} operations, {tally.total()} answers "
              f"({tally.total() / soaked:.1f}/s), load average {os.getloadavg()[0]:.1f} at the end")
        print(f"kills: {len(kills)} ({dict(collections.Counter(name for _, name in kills))})")
        by_op = collections.defaultdict(dict)
        for (op, status), n in sorted(tally.answers.items()):
            by_op[op][status] = n
        for op, statuses in sorted(by_op.items()):
            print(f"  {op:<16} {statuses}")
        print(f"connection resets (retried): {sum(tally.resets.values())} {dict(tally.resets)}; timeouts: {dict(tally.timeouts)}")
        print(f"503 with Retry-After: {tally.busy}; failed runs' 502: {tally.failed_runs}; other ≥ 500: {len(tally.unexpected)}")
        print(f"settled in {settled:.0f} s (left: {left}); runs {report['runs']}; deliveries {report['deliveries']}")
        print(f"webhook-ids received: {report['webhookIds']}, duplicates {report['duplicates']} "
              f"(unexplained by a kill: {len(report['duplicatesUnexplained'])}); failed verification: {deployment.receiver.failed_verification}")
        print(f"task failures: {len(report['taskFailures'])}; faults in the logs: {len(problems)}")
        for line in problems[:20]:
            print(f"    {line}")
        print("invariants: " + ("all hold" if not broken else "BROKEN"))
        for line in broken:
            print(f"  ✗ {line}")
    finally:
        deployment.close()
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
