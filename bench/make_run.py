"""Benchmark: `make run` to the first answer (issue 47), on a fresh data directory and on an installed one.

`make run` is `manage.py serve`: check the port, prepare (migrate, migrate every org store, collect
static files, the demo org, the minute schedules; migrations and static files skipped when their
fingerprints match the stamp in `AGENTS_DATA_DIR`), start honcho (daphne + a django-q2 cluster) and
print the banner once `/v1/agents/openapi.json` answers. Timed here, per start, from the command's
launch to that banner line on its standard output:

- `first`: a fresh `AGENTS_DATA_DIR` (what a new clone's first `make run` does once installed);
- `again`: the same data directory, stopped and started again (the stamp skips migrate and
  collectstatic: the figure the issue's goal, ≤ 30 s quiet, is about);
- `bare daphne` (the baseline, measured in the same run): `daphne server.asgi:application` on
  that prepared data directory to the first 200 of `/v1/agents/openapi.json`: the floor a start
  cannot go under (Django's import and the URLconf), with no preparation and no cluster.

Printed: each start's seconds, the median per kind, and `again ÷ bare daphne`.

    .venv/bin/python bench/make_run.py [--starts 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = str(Path(sys.executable))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    """SIGINT the process group (what Ctrl-C does to `make run`), then wait; SIGKILL after 60 s."""
    try:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def time_serve(data_dir: Path) -> float:
    """Seconds from launching `manage.py serve` to its "Serving on" line; the server is stopped after."""
    env = {**os.environ, "AGENTS_DATA_DIR": str(data_dir), "PORT": str(_free_port())}
    started = time.perf_counter()
    process = subprocess.Popen([PY, "manage.py", "serve"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        for line in process.stdout:
            if "Serving on http://" in line:
                return time.perf_counter() - started
        raise RuntimeError(f"manage.py serve exited with {process.wait()} before serving")
    finally:
        _stop(process)


def time_bare_daphne(data_dir: Path) -> float:
    """Seconds from launching daphne on the prepared `data_dir` to the first 200 of the OpenAPI document."""
    port = _free_port()
    env = {**os.environ, "AGENTS_DATA_DIR": str(data_dir)}
    started = time.perf_counter()
    process = subprocess.Popen([str(Path(PY).parent / "daphne"), "-e", f"tcp:port={port}:interface=127.0.0.1",
                                "server.asgi:application"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/agents/openapi.json", timeout=2) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - started
            except OSError:
                pass
            time.sleep(0.05)  # polling another process's start-up, the quantity measured
        raise RuntimeError(f"daphne exited with {process.returncode}")
    finally:
        _stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="starts of each kind (default 3)")
    args = parser.parse_args()
    first, again, bare = [], [], []
    for i in range(args.starts):
        data_dir = Path(tempfile.mkdtemp(prefix="bench-make-run-"))
        try:
            first.append(time_serve(data_dir))
            again.append(time_serve(data_dir))
            bare.append(time_bare_daphne(data_dir))
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
        print(f"start {i + 1}: first {first[-1]:.1f} s, again {again[-1]:.1f} s, bare daphne {bare[-1]:.1f} s", flush=True)
    load = os.getloadavg()
    print(f"\nmedian of {args.starts} (load {load[0]:.1f}):")
    print(f"  make run, fresh data directory   {statistics.median(first):6.1f} s")
    print(f"  make run, installed (again)      {statistics.median(again):6.1f} s   (goal ≤ 30 s quiet)")
    print(f"  bare daphne (baseline)           {statistics.median(bare):6.1f} s")
    print(f"  again ÷ bare daphne              {statistics.median(again) / statistics.median(bare):6.2f}×")


if __name__ == "__main__":
    main()
