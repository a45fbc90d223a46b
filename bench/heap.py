"""Benchmark: what a full garbage collection costs a serving process, with and without the
start-up heap frozen (`server.heap.settle`, `AGENTS_GC_FREEZE`).

For each setting a fresh interpreter imports the ASGI entry point (`server.asgi`: Django set
up and — when the freeze is on — `settle()`) and the URLconf with every view module (in both
settings, so both heaps hold the same modules), then times `gc.collect()` (the oldest generation: what pauses daphne's event loop)
`--collections` times. Printed per setting: the objects the collector tracks, how many are
frozen, the full collection's p50 / max in milliseconds; then frozen ÷ unfrozen (the baseline,
measured in the same run).

    .venv/bin/python bench/heap.py [--collections 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import gc, json, statistics, sys, time
import server.asgi  # noqa: F401  (settle() runs at its end when AGENTS_GC_FREEZE is on)
from django.urls import get_resolver
get_resolver().url_patterns  # every view module, in both settings (settle() imports them)
samples = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    gc.collect()
    samples.append((time.perf_counter() - started) * 1000)
print(json.dumps({"tracked": len(gc.get_objects()), "frozen": gc.get_freeze_count(),
                  "p50": statistics.median(samples), "max": max(samples)}))
"""


def measure(freeze: bool, collections: int) -> dict:
    """Run the child with `AGENTS_GC_FREEZE` on or off; return its figures (counts, ms)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "AGENTS_ORG_DATABASE")}
    with tempfile.TemporaryDirectory(prefix="agents-bench-heap-") as data_dir:
        env.update({"DJANGO_SETTINGS_MODULE": "agents_site.settings", "AGENTS_GC_FREEZE": "1" if freeze else "0",
                    "AGENTS_DATA_DIR": data_dir})
        out = subprocess.run([sys.executable, "-c", CHILD, str(collections)], cwd=ROOT, env=env,
                             capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", type=int, default=20)
    args = parser.parse_args()
    off, on = measure(False, args.collections), measure(True, args.collections)
    print(f"full collection of a process that imported server.asgi, {args.collections} collections, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'AGENTS_GC_FREEZE':<18}{'tracked':>10}{'frozen':>10}{'p50 ms':>10}{'max ms':>10}")
    for name, row in (("0 (baseline)", off), ("1", on)):
        print(f"{name:<18}{row['tracked']:>10}{row['frozen']:>10}{row['p50']:>10.1f}{row['max']:>10.1f}")
    print(f"frozen ÷ baseline, p50: {on['p50'] / off['p50']:.3f}×")


if __name__ == "__main__":
    main()
