"""Benchmark: Litestream replication lag under 100 appends/s, and restore time of a 100 MiB org file.

1. Lag: `manage.py replicate` (Litestream, a local directory as the replica) runs beside this
   process. A marker event is appended and the time until the replica holds an LTX file created
   after that commit is measured (the replica directory polled every 10 ms), first with the org
   idle (baseline), then while a writer appends 100 events/s to the same org: p50 / p95 / max and
   the ratio of the loaded p50 to the idle one.
2. Restore: an org file grown to 100 MiB (4 KiB rows) before replication starts (Litestream's
   first snapshot of it is the 100 MiB image), shipped, then `restore_org` (latest)
   end to end, its Litestream download-and-rebuild, and the time the org answered 503 (fence up
   to fence down); against a plain copy of the same file (`shutil.copyfile`) in the same run.

Run: `.venv/bin/python bench/backup.py [--samples 20] [--mib 100]` (fresh temporary dirs; prints
the load average beside the figures: the box is shared).
"""

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def newest_ltx_mtime(root: Path) -> float:
    newest = 0.0
    level0 = root / "ltx" / "0"
    if level0.is_dir():
        for entry in os.scandir(level0):
            if not entry.name.endswith(".ltx"):
                continue  # a file still being written (.tmp)
            try:
                newest = max(newest, entry.stat().st_mtime)
            except FileNotFoundError:
                continue  # compacted away meanwhile
    return newest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--mib", type=int, default=100)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="agents-bench-backup-"))
    os.environ["AGENTS_DATA_DIR"] = str(base / "data")
    os.environ["AGENTS_BACKUP_URL"] = str(base / "replica")
    os.environ["AGENTS_BACKUP_POLL_SECONDS"] = "0.2"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    from sessions import services
    from tenancy import stores
    from tenancy.backups import fence, litestream
    from tenancy.backups.replication import current_generation
    from tenancy.backups.restore import restore_org
    from tenancy.services import org_create

    call_command("migrate", verbosity=0)
    org_create(slug="lag")
    org_create(slug="big")
    with stores.org_context("lag"):
        session = services.session_create(agent="bench", actor="bench")
    big = stores.store_path("big")
    with sqlite3.connect(big) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_filler (id INTEGER PRIMARY KEY, body BLOB)")
        row = os.urandom(4096)
        for _ in range(args.mib):
            conn.executemany("INSERT INTO bench_filler (body) VALUES (?)", [(row,)] * 256)
            conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = big.stat().st_size
    print(f"load average before: {os.getloadavg()}")

    replicate = subprocess.Popen([sys.executable, "manage.py", "replicate"], cwd=ROOT, env=dict(os.environ),
                                 stdout=open(base / "replicate.log", "wb"), stderr=subprocess.STDOUT)
    control = litestream.Control()
    try:
        lag_path = str(stores.store_path("lag"))
        while not (control.alive() and lag_path in control.databases()):
            time.sleep(0.05)
        control.sync(lag_path)
        replica = litestream.local_path(current_generation("lag").replica_url)

        def append(text: str) -> None:
            with stores.org_context("lag"):
                services.append_checked(session_id=session.id, kind="log", payload_text=f'{{"text": "{text}"}}', actor="")

        def sample() -> float:
            before = newest_ltx_mtime(replica)
            append("marker")
            committed = time.time()
            while True:
                newest = newest_ltx_mtime(replica)
                if newest > before and newest >= committed - 0.002:
                    return time.time() - committed
                time.sleep(0.01)

        idle = [sample() for _ in range(args.samples)]
        import multiprocessing

        stop = multiprocessing.Event()
        appended = multiprocessing.Value("i", 0)

        def writer():  # a process of its own (forked): the sampler's polling never starves it of the GIL
            interval = 1.0 / args.rate
            next_at = time.monotonic()
            while not stop.is_set():
                append("load")
                with appended.get_lock():
                    appended.value += 1
                next_at += interval
                time.sleep(max(0.0, next_at - time.monotonic()))

        process = multiprocessing.get_context("fork").Process(target=writer, daemon=True)
        started = time.monotonic()
        process.start()
        loaded = [sample() for _ in range(args.samples)]
        stop.set()
        process.join(timeout=30)
        rate = appended.value / (time.monotonic() - started)
        print(f"lag idle    p50 {pct(idle, .5) * 1000:.0f} ms  p95 {pct(idle, .95) * 1000:.0f} ms  max {max(idle) * 1000:.0f} ms")
        print(f"lag loaded  p50 {pct(loaded, .5) * 1000:.0f} ms  p95 {pct(loaded, .95) * 1000:.0f} ms  max {max(loaded) * 1000:.0f} ms"
              f"  ({rate:.0f} appends/s achieved)  ratio p50 loaded/idle {statistics.median(loaded) / statistics.median(idle):.2f}")
        print(f"load average after lag: {os.getloadavg()}")

        while str(big) not in control.databases():
            time.sleep(0.05)
        shipped = time.monotonic()
        control.sync(str(big), timeout=600)
        print(f"org file {size / 2**20:.1f} MiB shipped in {time.monotonic() - shipped:.1f} s")

        copy_started = time.monotonic()
        shutil.copyfile(big, base / "copy.db")
        copy_seconds = time.monotonic() - copy_started
        marks = {}

        def say(line: str) -> None:
            if " is back as of " in line:
                marks["phases"] = line.split("; offline ", 1)[1]
            if "is offline" in line:
                marks["offline"] = time.monotonic()
            if "restored file ready" in line:
                marks["ready"] = time.monotonic()
                marks["litestream_ms"] = line.split(" in ", 1)[1].split(" ms", 1)[0]

        restore_started = time.monotonic()
        restore_org("big", None, say=say)
        ended = time.monotonic()
        assert not fence.restoring("big")
        print(f"restore of {size / 2**20:.1f} MiB: {ended - restore_started:.2f} s end to end "
              f"(file rebuilt and migrated beside the live one {marks['ready'] - restore_started:.2f} s, "
              f"of which Litestream's restore {marks['litestream_ms']} ms; "
              f"org answering 503 for {ended - marks['offline']:.2f} s); plain copy {copy_seconds:.2f} s; "
              f"ratio restore/copy {(ended - restore_started) / copy_seconds:.1f}")
        print(f"  offline {marks['phases']}")
        print(f"load average after: {os.getloadavg()}")
    finally:
        replicate.terminate()
        replicate.wait(timeout=60)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
