"""Benchmark the scale-out mode (issue 17 item 3): event appends on PostgreSQL + Redis against SQLite.

One run measures, each against a baseline taken in the same run (the machine is shared; only
ratios travel):

1. appends/s on one daphne process, SQLite mode (default and org stores SQLite files): baseline;
2. the same on PostgreSQL mode (`DATABASE_URL` + `AGENTS_ORG_DATABASE=postgres` + `REDIS_URL`),
   ratio 2 ÷ 1 (goal ≥ 0.9);
3. the same PostgreSQL deployment served by two daphne processes, the clients split between
   them, ratio 3 ÷ 2 (goal ≥ 1.6);
4. `--burst` (256) simultaneous appends to one session across the two processes: errors, and
   whether the session's seq is dense 1..N;
5. PostgreSQL mode, the org's event sequencer (`sessions.clock`, issue 26 item 3): in measures
   2 and 3, how many events each sequencer run positioned (distinct `xmin` of the positioned
   rows: each run is one transaction) and the lock sampler's waits on its advisory lock; then,
   alone, how long one run takes from the client (an upper bound of the time it holds the
   org's lock: lock, one UPDATE, commit, and the loopback round trip) for 1, 8 and 64 events.

Load: `--clients` keep-alive clients (a light asyncio HTTP/1.1 client, so the load generator
takes little of the CPU the servers need), each appending to its own session of one org
(`--appends` in all per measure, after `--warmup` each); `--orgs N` spreads them over N orgs. With `--profile DIR`, py-spy samples
both daphne processes during measure 3 and writes `DIR/daphne-{1,2}.txt` (collapsed stacks) and
prints the heaviest frames.

    .venv/bin/python bench/scaleout.py
    .venv/bin/python bench/scaleout.py --profile /tmp/scaleout-profile

Needs PostgreSQL (`--postgres`, trust auth) and Redis (`--redis`). Everything is made under
names of this run (`agb_{pid}_…`) and dropped at the end; nothing is left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = f"agb_{os.getpid()}"

SETUP = """
import django, json, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0, interactive=False)
from tenancy.services import api_key_create, membership_set, org_create
keys = []
for n in range(int(sys.argv[1])):
    org = org_create(slug=f"bench{n}", name="bench")
    membership = membership_set(org=org, username=f"bench{n}", password="bench", is_admin=True)
    keys.append(api_key_create(org=org, user=membership.user)[1])
print(json.dumps({"keys": keys}))
"""


SEQUENCER = """
import django, json, statistics, sys, time
django.setup()
from django.db import transaction
from django.utils import timezone
from sessions import queries, services
from tenancy import stores
out = {}
with stores.org_context(sys.argv[1]) as alias:
    connection = transaction.get_connection(alias)
    session = services.session_create(agent="sequencer", actor="bench")
    for size in (1, 8, 64):
        runs = []
        for _ in range(30):
            for _ in range(size):
                queries.append_in_one_statement(connection, session_id=session.id, kind="log", payload_text="", actor="bench", now=timezone.now())
            started = time.perf_counter()
            positioned = queries.sequence(connection, alias)
            runs.append(time.perf_counter() - started)
            assert len(positioned) == size, len(positioned)
        out[size] = statistics.median(runs) * 1e6
print(json.dumps(out))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Site:
    """One deployment's environment: a data directory and, in PostgreSQL mode, its databases."""

    def __init__(self, mode: str, args) -> None:
        self.mode = mode
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"{RUN}-{mode}-"))
        self.env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agents_site.settings", "AGENTS_DATA_DIR": str(self.data_dir), "PYTHONPATH": str(ROOT)}
        for name in ("DATABASE_URL", "REDIS_URL", "AGENTS_ORG_DATABASE", "AGENTS_ORG_DATABASE_SERVERS"):
            self.env.pop(name, None)
        self.server = args.postgres
        if mode == "postgres":
            self.default_db = f"{RUN}_default"
            self._psql(f'CREATE DATABASE "{self.default_db}"')
            base = args.postgres.rsplit("/", 1)[0]
            self.env.update(
                {
                    "DATABASE_URL": f"{base}/{self.default_db}",
                    "AGENTS_ORG_DATABASE": "postgres",
                    "AGENTS_ORG_DATABASE_PREFIX": f"{RUN}_org_",
                    "REDIS_URL": args.redis,
                }
            )
        out = subprocess.run([sys.executable, "-c", SETUP, str(args.orgs)], cwd=ROOT, env=self.env, check=True, capture_output=True, text=True)
        self.keys = json.loads(out.stdout.strip().splitlines()[-1])["keys"]
        self.key = self.keys[0]
        self.procs: list[subprocess.Popen] = []

    def org_database(self, n: int = 0) -> str:
        """The connection URL of org `bench{n}`'s database (PostgreSQL mode)."""
        return f"{self.server.rsplit('/', 1)[0]}/{self.env['AGENTS_ORG_DATABASE_PREFIX']}bench{n}"

    def _psql(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(statement)

    def start(self) -> tuple[subprocess.Popen, int]:
        import httpx

        port = free_port()
        log = open(self.data_dir / f"daphne-{port}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "server.asgi:application"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        for _ in range(600):
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/agents/openapi.json", timeout=1)
                return proc, port
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("daphne did not start")

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.mode == "postgres":
            import psycopg

            with psycopg.connect(self.server, autocommit=True) as conn:
                names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (RUN,))]
                for name in names:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            import redis

            client = redis.Redis.from_url(self.env["REDIS_URL"])
            client.flushdb()
        shutil.rmtree(self.data_dir, ignore_errors=True)


# --- a light keep-alive HTTP/1.1 client --------------------------------------------------


class Conn:
    """One keep-alive HTTP/1.1 connection speaking just enough for JSON requests."""

    def __init__(self, port: int, key: str) -> None:
        self.port, self.key = port, key

    async def open(self) -> Conn:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        self.writer.write(head.encode() + data)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        raw = await self.reader.readexactly(length) if length else b""
        return status, (json.loads(raw) if raw else {})

    def close(self) -> None:
        self.writer.close()


async def _appends(ports: list[int], keys: list[str], clients: int, total: int, warmup: int) -> tuple[float, int]:
    """`clients` connections spread over `ports` and the orgs of `keys`, each appending to its own
    session; return (appends/s, errors)."""
    conns = [await Conn(ports[i % len(ports)], keys[(i // len(ports)) % len(keys)]).open() for i in range(clients)]
    sessions = []
    for conn in conns:
        status, body = await conn.request("POST", "/v1/agents/sessions", {"agent": "bench"})
        assert status == 201, body
        sessions.append(body["id"])
    errors = 0

    async def run(conn: Conn, session_id: str, count: int) -> None:
        nonlocal errors
        for n in range(count):
            status, _ = await conn.request("POST", f"/v1/agents/sessions/{session_id}/events", {"kind": "message", "payload": {"text": "a turn", "n": n}})
            errors += status != 201

    await asyncio.gather(*(run(c, s, warmup) for c, s in zip(conns, sessions)))
    per_client = total // clients
    started = time.perf_counter()
    await asyncio.gather(*(run(c, s, per_client) for c, s in zip(conns, sessions)))
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.close()
    return per_client * clients / elapsed, errors


async def _burst(ports: list[int], key: str, count: int) -> tuple[collections.Counter, bool]:
    """`count` simultaneous appends to one session over `ports`; return (statuses, seq dense)."""
    opener = await Conn(ports[0], key).open()
    status, session = await opener.request("POST", "/v1/agents/sessions", {"agent": "burst"})
    assert status == 201, session
    conns = [await Conn(ports[i % len(ports)], key).open() for i in range(count)]
    results = await asyncio.gather(
        *(c.request("POST", f"/v1/agents/sessions/{session['id']}/events", {"kind": "message", "payload": {"n": i}}) for i, c in enumerate(conns))
    )
    statuses = collections.Counter(status for status, _ in results)
    seqs = sorted(body.get("seq", 0) for status, body in results if status == 201)
    for conn in conns:
        conn.close()
    opener.close()
    return statuses, seqs == list(range(1, count + 1))


def _cpu_seconds(pids: list[int]) -> float:
    """User+system CPU seconds used so far by `pids` (from /proc; 0 for a process gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def _postgres_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


class LockSampler:
    """Samples pg_stat_activity every 10 ms: how often the run's backends are active, and waiting on a lock."""

    def __init__(self, server: str | None) -> None:
        self.server, self.samples, self.active, self.waiting = server, 0, 0, collections.Counter()
        self.statements: collections.Counter[str] = collections.Counter()  # what the waiting backends were running
        self._stop = False

    def __enter__(self) -> LockSampler:
        import threading

        if self.server:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            while not self._stop:
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) FROM pg_stat_activity"
                    " WHERE starts_with(datname, %s) AND pid <> pg_backend_pid()",
                    (RUN,),
                ).fetchall()
                self.samples += 1
                for state, kind, event, query in rows:
                    if state == "active" or state == "idle in transaction":
                        self.active += 1
                        if kind == "Lock":
                            self.waiting[event] += 1
                            self.statements[query] += 1
                time.sleep(0.01)

    def __exit__(self, *exc) -> None:
        self._stop = True
        if self.server:
            self._thread.join()

    def line(self) -> str:
        waits = sum(self.waiting.values())
        kinds = ", ".join(f"{k} {v}" for k, v in self.waiting.most_common(3)) or "none"
        top = "; ".join(f"{n}× {q!r}" for q, n in self.statements.most_common(2))
        return (f"busy backends per sample {self.active / max(1, self.samples):.2f}; of those, waiting on a lock "
                f"{waits / max(1, self.active) * 100:.1f}% ({kinds}); waiting in: {top or '-'}")


def _head(org_url: str) -> int:
    import psycopg

    with psycopg.connect(org_url, autocommit=True) as conn:
        return conn.execute("SELECT last FROM agent_sessions_eventclock WHERE id = 1").fetchone()[0]


def _sequencer_runs(org_url: str, after: int) -> str:
    """How the events positioned past `after` were sequenced: one transaction (xmin) per run."""
    import psycopg

    with psycopg.connect(org_url, autocommit=True) as conn:
        rows, runs, biggest = conn.execute(
            "SELECT count(*), count(DISTINCT x), max(n) FROM (SELECT xmin::text AS x, count(*) OVER (PARTITION BY xmin::text) AS n"
            " FROM agent_sessions_event WHERE position > %s) AS t", (after,)).fetchone()
        waiting = conn.execute("SELECT count(*) FROM agent_sessions_event WHERE position IS NULL").fetchone()[0]
    return (f"sequencer: {rows} events positioned by {runs} runs ({rows / max(1, runs):.2f} events a run, at most {biggest}); "
            f"{waiting} left unpositioned")


def measure(label: str, procs: list[subprocess.Popen], coro_factory, baseline: float | None = None, goal: str = "", server: str | None = None,
            org_url: str | None = None) -> float:
    """Run one appends measure; print appends/s, the ratio to `baseline`, and who used the CPU."""
    head = _head(org_url) if org_url else 0
    pg_before = {pid: _cpu_seconds([pid]) for pid in _postgres_pids()}
    daphne_before = _cpu_seconds([p.pid for p in procs])
    self_before = time.process_time()
    wall = time.perf_counter()
    with LockSampler(server) as locks:
        rate, errors = asyncio.run(coro_factory())
    wall = time.perf_counter() - wall
    daphne = _cpu_seconds([p.pid for p in procs]) - daphne_before
    pg = sum(_cpu_seconds([pid]) - pg_before.get(pid, 0.0) for pid in _postgres_pids())
    client = time.process_time() - self_before
    ratio = f" = {rate / baseline:.2f} × {goal}" if baseline else " — baseline"
    print(f"{label:<31}: {rate:7.1f} appends/s (errors {errors}){ratio}")
    print(f"{'':<33}CPU over {wall:.1f} s: daphne(s) {daphne / wall:.2f} cores, postgres {pg / wall:.2f}, bench client {client / wall:.2f}, "
          f"machine load {os.getloadavg()[0]:.1f}")
    if server:
        print(f"{'':<33}{locks.line()}")
    if org_url:
        print(f"{'':<33}{_sequencer_runs(org_url, head)}")
    return rate


def _profile(pids: list[int], seconds: float, out_dir: Path) -> list[subprocess.Popen]:
    out_dir.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).with_name("py-spy"))
    return [
        subprocess.Popen([spy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "100", "-f", "raw", "-o", str(out_dir / f"daphne-{n}.txt"), "--nonblocking"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for n, pid in enumerate(pids, 1)
    ]


#: What a sampled stack is doing, first match wins (the profile's finding is the split between them).
BUCKETS = [
    ("waiting: idle threads and the event loop's select", ("_worker (", "Condition.wait", "EpollSelector.select", "_wait_for_tstate_lock", "Queue.get")),
    ("waiting on PostgreSQL (a round trip or a lock)", ("Connection.wait", "_execute_send", "_exec_command", "PQ")),
    ("waiting for a pooled connection", ("ConnectionPool.getconn", "Waiting.wait")),
    ("API key → principal (Python)", ("_from_api_key",)),
    ("the append (Python: checks, scan, ORM)", ("session_append_event",)),
    ("Django/ninja request handling", ("ASGIHandler", "BaseHandler", "Operation.run", "SyncToAsync")),
    ("daphne/twisted/asyncio loop", ("daphne", "twisted", "asyncio")),
]


def _heaviest(path: Path) -> list[tuple[float, str]]:
    """Return each bucket's share of the non-idle samples of a py-spy raw profile."""
    shares: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        samples += int(count)
        frames = stack.split(";")
        leaf = frames[-1]
        for name, marks in BUCKETS:
            where = leaf if name.startswith("waiting") else stack
            if any(m in where for m in marks):
                shares[name] += int(count)
                break
        else:
            shares["other"] += int(count)
    return [(n / max(1, samples), name) for name, n in shares.most_common()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/7")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--appends", type=int, default=1600)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--burst", type=int, default=256)
    parser.add_argument("--orgs", type=int, default=1, help="spread the clients over this many orgs (1: one org, its clock shared)")
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--async-commit", action="store_true",
                        help="experiment: ALTER the org databases to synchronous_commit=off (is the commit's WAL flush what the clock lock waits on?)")
    args = parser.parse_args()

    print(f"# bench/scaleout.py — {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    print(f"# {args.clients} keep-alive clients, each on its own session, over {args.orgs} org(s); {args.appends} appends per measure")
    sqlite = Site("sqlite", args)
    try:
        one, port = sqlite.start()
        rate_sqlite = measure("SQLite mode, 1 daphne", [one], lambda: _appends([port], sqlite.keys, args.clients, args.appends, args.warmup))
        two, port2 = sqlite.start()
        measure("SQLite mode, 2 daphnes", [one, two], lambda: _appends([port, port2], sqlite.keys, args.clients, args.appends, args.warmup),
                rate_sqlite, "SQLite 1 daphne (the machine's own 2-process figure)")
    finally:
        sqlite.close()

    pg = Site("postgres", args)
    try:
        if args.async_commit:
            import psycopg

            with psycopg.connect(args.postgres, autocommit=True) as conn:
                for (name,) in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (f"{RUN}_org_bench",)).fetchall():
                    conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
            print("# experiment: org databases at synchronous_commit = off")
        first, port1 = pg.start()
        rate_pg1 = measure("PostgreSQL mode, 1 daphne", [first], lambda: _appends([port1], pg.keys, args.clients, args.appends, args.warmup),
                           rate_sqlite, "SQLite 1 daphne (goal ≥ 0.9)", server=args.postgres,
                           org_url=pg.org_database())
        second, port2 = pg.start()
        spies = _profile([first.pid, second.pid], max(5, args.appends / max(rate_pg1, 1)), args.profile) if args.profile else []
        measure("PostgreSQL mode, 2 daphnes", [first, second], lambda: _appends([port1, port2], pg.keys, args.clients, args.appends, args.warmup),
                rate_pg1, "PostgreSQL 1 daphne (goal ≥ 1.6)", server=args.postgres, org_url=pg.org_database())
        for spy in spies:
            spy.wait(120)
        statuses, dense = asyncio.run(_burst([port1, port2], pg.key, args.burst))
        print(f"{args.burst} simultaneous appends, 2 daphnes, one session: statuses {dict(statuses)}, seq dense 1..{args.burst}: {dense}")
        out = subprocess.run([sys.executable, "-c", SEQUENCER, "bench0"], cwd=ROOT, env=pg.env, check=True, capture_output=True, text=True)
        alone = json.loads(out.stdout.strip().splitlines()[-1])
        print("one sequencer run alone, from the client (lock + UPDATE + commit + round trip; median of 30): "
              + ", ".join(f"{size} event(s) {us:.0f} µs" for size, us in alone.items()))
        if args.profile:
            for n in (1, 2):
                path = args.profile / f"daphne-{n}.txt"
                if path.exists():
                    print(f"## daphne {n} during the 2-process measure: where its busy threads were (py-spy, share of samples)")
                    for share, name in _heaviest(path):
                        print(f"  {share * 100:5.1f}%  {name}")
    finally:
        pg.close()


if __name__ == "__main__":
    main()
