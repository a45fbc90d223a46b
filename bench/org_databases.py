"""Benchmark the cost of one org database on a PostgreSQL server (issue 17 item 5; not in CI).

Creates `--orgs` org databases through the real backend (`tenancy.stores.open_store` in
PostgreSQL org mode: a copy of the migrated template, `CREATE DATABASE … TEMPLATE`) on one
server, and measures per org: creation time (median and p95 per batch of 100, to see whether
it grows with the count), disk (the org database's size, and the growth of the server's
`base/` directory and file count, read from its data directory), WAL written, and the server
catalog: `pg_database`'s size, the time of the one query `existing_org_slugs` makes, and a
cold connection's first query, before and after. Stops early at `--max-seconds` of creating
and says how many it made. Everything is dropped at the end (drop time measured too).

    .venv/bin/python bench/org_databases.py --orgs 1000

Reads the data directory (`--data-dir`, default Debian's 15/main) as root for disk figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RUN = f"agbo_{os.getpid()}"


def du(path: Path) -> tuple[int, int]:
    """Return (bytes, files) under `path`."""
    size = files = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            try:
                size += os.lstat(os.path.join(dirpath, name)).st_size
                files += 1
            except OSError:
                pass
    return size, files


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--orgs", type=int, default=1000)
    parser.add_argument("--max-seconds", type=float, default=150.0)
    parser.add_argument("--data-dir", type=Path, default=Path("/var/lib/postgresql/15/main"))
    args = parser.parse_args()

    import psycopg

    server = args.postgres
    default_db = f"{RUN}_default"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{default_db}"')
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "agents_site.settings",
            "AGENTS_DATA_DIR": tempfile.mkdtemp(prefix=RUN),
            "DATABASE_URL": f"{server.rsplit('/', 1)[0]}/{default_db}",
            "AGENTS_ORG_DATABASE": "postgres",
            "AGENTS_ORG_DATABASE_PREFIX": f"{RUN}_",
        }
    )
    os.environ.pop("AGENTS_ORG_DATABASE_SERVERS", None)
    import django

    django.setup()
    from django.core.management import call_command

    from tenancy import stores

    call_command("migrate", verbosity=0, interactive=False)
    admin = psycopg.connect(server, autocommit=True)

    def catalog() -> dict:
        started = time.perf_counter()
        count = admin.execute("SELECT count(*) FROM pg_database").fetchone()[0]
        admin.execute("SELECT datname FROM pg_database").fetchall()
        query_ms = (time.perf_counter() - started) * 1000
        size = admin.execute("SELECT pg_relation_size('pg_database') + pg_relation_size('pg_shdepend') + pg_relation_size('pg_authid')").fetchone()[0]
        return {"databases": count, "list_ms": query_ms, "shared_catalog_bytes": size}

    def cold_first_query(dbname: str, n: int = 10) -> float:
        times = []
        for _ in range(n):
            started = time.perf_counter()
            with psycopg.connect(f"{server.rsplit('/', 1)[0]}/{dbname}") as conn:
                conn.execute("SELECT count(*) FROM agents_agent").fetchone()
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000

    stores.ensure_templates()  # the template exists before the clock starts (deploy time)
    probe = "probe"
    stores.open_store(probe)
    before_cat, before_cold = catalog(), cold_first_query(stores.postgres_database_name(probe))
    before_disk = du(args.data_dir / "base")
    lsn0 = admin.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    print(f"# bench/org_databases.py — {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, server {server.rsplit('@', 1)[-1]}")

    batches: list[list[float]] = []
    made = 0
    started_all = time.perf_counter()
    try:
        while made < args.orgs and time.perf_counter() - started_all < args.max_seconds:
            batch = []
            for _ in range(min(100, args.orgs - made)):
                slug = f"o{made:06d}"
                t0 = time.perf_counter()
                stores.open_store(slug)
                batch.append(time.perf_counter() - t0)
                stores.close_store(slug)
                made += 1
            batches.append(batch)
        elapsed = time.perf_counter() - started_all
        lsn1 = admin.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        wal = admin.execute("SELECT pg_wal_lsn_diff(%s, %s)", (lsn1, lsn0)).fetchone()[0]
        after_disk = du(args.data_dir / "base")
        after_cat, after_cold = catalog(), cold_first_query(stores.postgres_database_name(probe))
        one_size = admin.execute("SELECT pg_database_size(%s)", (stores.postgres_database_name("o000000"),)).fetchone()[0]
        all_times = [t for b in batches for t in b]
        print(f"org databases created        : {made} in {elapsed:.1f} s (stopped at {args.max_seconds:.0f} s)" if made < args.orgs else
              f"org databases created        : {made} in {elapsed:.1f} s")
        print(f"creation, all                : median {statistics.median(all_times) * 1000:.1f} ms, p95 {p95(all_times) * 1000:.1f} ms")
        for i, batch in enumerate(batches):
            print(f"  orgs {i * 100 + 1:>5}–{i * 100 + len(batch):<5}      : median {statistics.median(batch) * 1000:.1f} ms, p95 {p95(batch) * 1000:.1f} ms")
        print(f"one org database (pg_database_size): {one_size / 1024 / 1024:.2f} MiB")
        print(f"server base/ growth per org  : {(after_disk[0] - before_disk[0]) / made / 1024 / 1024:.2f} MiB, {(after_disk[1] - before_disk[1]) / made:.0f} files")
        print(f"WAL written per org          : {wal / made / 1024 / 1024:.2f} MiB")
        print(f"pg_database rows             : {before_cat['databases']} → {after_cat['databases']}")
        print(f"shared catalogs (pg_database, pg_shdepend, pg_authid): {before_cat['shared_catalog_bytes'] / 1024:.0f} KiB → {after_cat['shared_catalog_bytes'] / 1024:.0f} KiB")
        print(f"list every database (existing_org_slugs' query): {before_cat['list_ms']:.2f} ms → {after_cat['list_ms']:.2f} ms")
        print(f"cold connection + first query of an org database: {before_cold:.1f} ms → {after_cold:.1f} ms (median of 10)")
    finally:
        from django.db import connections

        connections.close_all()
        names = [r[0] for r in admin.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (RUN,))]
        t0 = time.perf_counter()
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        print(f"dropped {len(names)} databases in {time.perf_counter() - t0:.1f} s ({(time.perf_counter() - t0) / max(1, len(names)) * 1000:.0f} ms each)")
        admin.close()


if __name__ == "__main__":
    main()
