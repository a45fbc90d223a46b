"""Benchmark: the cost of an org's first request, and whether org count slows requests.

1. Provisioning a new org's store by copying the migrated template, against running
   `migrate` on an empty file (the naive way), in the same run: ratio.
2. `GET /v1/agents` latency (p50/p99, Django test client, in-process) for one org while the
   process knows 1 org, then again after 2,000 more orgs were provisioned: ratio.

Run: `.venv/bin/python bench/provision.py [--orgs 2000]` (uses a fresh temporary data dir).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--orgs", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    data_dir = tempfile.mkdtemp(prefix="agents-bench-")
    os.environ["AGENTS_DATA_DIR"] = data_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")
    os.environ.pop("DATABASE_URL", None)
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from tenancy import registry, stores
    from tenancy.backends import sqlite as sqlite_backend
    from tenancy.backends.base import migrate
    from tenancy.services import api_key_create, membership_set, org_create

    call_command("migrate", verbosity=0)
    stores.template_path()

    # 1. template copy vs migrate on an empty file
    copy_times, migrate_times = [], []
    for i in range(args.samples):
        t0 = time.perf_counter()
        with stores.org_context(f"copy-{i}"):
            from agents.models import Agent

            Agent.objects.count()
        copy_times.append(time.perf_counter() - t0)
    for i in range(min(args.samples, 5)):
        path = Path(data_dir) / "naive" / f"{i}.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        alias = f"orgtemplate_naive_{i}"
        registry.register(alias, sqlite_backend.sqlite_settings(path))
        t0 = time.perf_counter()
        migrate(alias)
        migrate_times.append(time.perf_counter() - t0)
        registry.unregister(alias)
    copy_ms, migrate_ms = statistics.median(copy_times) * 1000, statistics.median(migrate_times) * 1000
    print(f"first use of a new org (template copy + first query): median {copy_ms:.1f} ms over {len(copy_times)}")
    print(f"migrate on an empty file (baseline):                   median {migrate_ms:.1f} ms over {len(migrate_times)}")
    print(f"ratio copy/migrate: {copy_ms / migrate_ms:.3f} ({migrate_ms / copy_ms:.0f}x faster)")

    # 2. GET /v1/agents with 1 org vs with N orgs provisioned
    org = org_create(slug="bench-org")
    membership = membership_set(org=org, username="bench", is_admin=True)
    _, key = api_key_create(org=org, user=membership.user)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    for i in range(3):
        client.post("/v1/agents", {"name": f"a{i}"}, content_type="application/json")

    def measure():
        samples = []
        for _ in range(args.requests):
            t0 = time.perf_counter()
            response = client.get("/v1/agents")
            samples.append(time.perf_counter() - t0)
            assert response.status_code == 200
        return pct(samples, 0.5) * 1000, pct(samples, 0.99) * 1000

    measure()  # warm-up
    p50_one, p99_one = measure()
    t0 = time.perf_counter()
    for i in range(args.orgs):
        org_create(slug=f"many-{i}")
    provision_s = time.perf_counter() - t0
    p50_many, p99_many = measure()
    print(f"provisioned {args.orgs} orgs in {provision_s:.1f} s ({provision_s / args.orgs * 1000:.2f} ms each)")
    print(f"GET /v1/agents with 1 org:      p50 {p50_one:.2f} ms  p99 {p99_one:.2f} ms")
    print(f"GET /v1/agents with {args.orgs + 1 + args.samples} orgs: p50 {p50_many:.2f} ms  p99 {p99_many:.2f} ms")
    print(f"ratio many/one: p50 {p50_many / p50_one:.2f}  p99 {p99_many / p99_one:.2f}")
    shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
