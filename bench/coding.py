"""Benchmark: the platform overhead of a coding run against the same git work done by a script.

One scripted 5-turn coding run (write a file, run a test in the sandbox, edit a file, write a
second file, finish) through the real engine: `coding_start` (gate, run, session, record)
then `coding_execute` (clone into a fresh working copy, five completions from the loopback
OpenAI-compatible upstream answering at once, the tools, three commits with trailers and
their events, the push), against a bare repository on disk. Baseline, in the same process
and run: a plain script doing the same git and file work directly (clone, write, run the test
in the same bubblewrap sandbox, edit, write, three commits, push) with no model, no session,
no records. The ratio is run ÷ baseline; the difference is what the platform adds.

    .venv/bin/python bench/coding.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEST = "def test():\n    assert 2 * 3 == 6\n\nif __name__ == '__main__':\n    test()\n    print('PASSED')\n"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": "/nonexistent", "PATH": "/usr/bin:/bin",
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


def setup(data_dir: Path, remotes: Path):
    os.environ["AGENTS_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"
    os.environ["AGENTS_REPO_FILE_ROOTS"] = str(remotes)
    os.environ["AGENTS_CODING_WORK_DIR"] = str(data_dir / "work")
    os.environ["AGENTS_CODING_MAX_CONCURRENT"] = "1000"
    for name in ("DATABASE_URL", "REDIS_URL", "AGENTS_ORG_DATABASE", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.core.management import call_command

    from billing.services import credit_add
    from tenancy.services import membership_set, org_create

    call_command("migrate", verbosity=0)
    org = org_create(slug="bench-coding")
    membership_set(org=org, username="bench", is_admin=True)
    credit_add(org=org, cents=10_000_000, note="bench")
    return org.slug


def make_remote(remotes: Path, name: str) -> Path:
    bare = remotes / f"{name}.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    seed = remotes.parent / f"seed-{name}"
    git("init", "-q", "-b", "main", str(seed))
    (seed / "README.md").write_text("# bench\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "seed", cwd=seed)
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=seed)
    shutil.rmtree(seed)
    return bare


def script(upstream) -> None:
    from tests.support.upstream import Reply

    upstream.script(
        Reply(content="Add a test", tool_calls=[("write_file", {"path": "test_mul.py", "content": TEST})]),
        Reply(tool_calls=[("run", {"command": "python3 test_mul.py"})]),
        Reply(content="Document it", tool_calls=[("edit_file", {"path": "README.md", "search": "# bench\n", "replace": "# bench\n\nRun test_mul.py\n"})]),
        Reply(content="Add notes", tool_calls=[("write_file", {"path": "NOTES.md", "content": "notes\n"})]),
        Reply(tool_calls=[("finish", {"summary": "Added a test, docs and notes"})]),
    )


def platform_run(slug: str, principal) -> float:
    from coding.services import coding_execute, coding_start
    from tenancy import stores

    start = time.perf_counter()
    with stores.org_context(slug):
        run, _ = coding_start(principal=principal, prompt="add a multiplication test", repo="bench/shop")
    with stores.org_context(slug):
        status = coding_execute(run_id=run.id)
    elapsed = (time.perf_counter() - start) * 1000
    assert status == "ok", status
    return elapsed


def baseline_run(remote: Path, work_root: Path, n: int) -> float:
    from coding.sandbox import default_limits, get_sandbox

    sandbox = get_sandbox()
    start = time.perf_counter()
    work = work_root / f"base-{n}"
    git("clone", "-q", str(remote), str(work))
    git("checkout", "-q", "-b", f"script/{n}", cwd=work)
    (work / "test_mul.py").write_text(TEST)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "Add a test", cwd=work)
    result = sandbox.run("python3 test_mul.py", workdir=work, limits=default_limits())
    assert "PASSED" in result.output
    readme = work / "README.md"
    readme.write_text(readme.read_text().replace("# bench\n", "# bench\n\nRun test_mul.py\n", 1))
    git("commit", "-q", "-am", "Document it", cwd=work)
    (work / "NOTES.md").write_text("notes\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "Add notes", cwd=work)
    git("push", "-q", "origin", f"HEAD:refs/heads/script/{n}", cwd=work)
    shutil.rmtree(work)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="agents-bench-coding-"))
    remotes = base / "remotes"
    remotes.mkdir()
    slug = setup(base / "data", remotes)

    from django.conf import settings

    from agents_site.vocabulary import PrincipalVia
    from coding.sandbox import get_sandbox
    from coding.services import repo_create
    from tenancy import stores
    from tenancy.principal import Principal
    from tests.support.upstream import Upstream

    if not get_sandbox().available():
        sys.exit("bubblewrap is not installed: apt-get install -y bubblewrap")
    upstream = Upstream().start()
    settings.INFERENCE_BASE_URL = upstream.base_url
    settings.INFERENCE_API_KEY = "bench"
    settings.AGENTS_DEFAULT_MODEL = "test-model"
    principal = Principal(subject="bench", via=PrincipalVia.API_KEY, org_slug=slug, is_org_admin=True)
    remote = make_remote(remotes, "shop")
    with stores.org_context(slug):
        repo_create(principal=principal, owner="bench", name="shop", clone_url=f"file://{remote}")
    scratch = base / "scratch"
    scratch.mkdir()

    script(upstream)
    platform_run(slug, principal)  # warm-up (imports, first store open, sandbox probe)
    baseline_run(remote, scratch, -1)
    runs, baselines = [], []
    for n in range(args.runs):  # interleaved, so drift hits both sides alike
        upstream.reset()
        script(upstream)
        runs.append(platform_run(slug, principal))
        baselines.append(baseline_run(remote, scratch, n))
    upstream.stop()

    def line(name: str, values: list[float]) -> str:
        return f"| {name} | {statistics.median(values):.0f} | {pct(values, 0.95):.0f} | {statistics.mean(values):.0f} |"

    print(f"5-turn coding run, {args.runs} runs each, upstream answering at once, bubblewrap sandbox")
    print("| path | p50 ms | p95 ms | mean ms |\n|---|---|---|---|")
    print(line("script: clone, write, sandboxed test, edit, write, 3 commits, push", baselines))
    print(line("platform: POST-equivalent start + engine (5 completions, tools, 3 commits, events, push)", runs))
    ratio = statistics.median(runs) / statistics.median(baselines)
    print(f"\nratio (p50 run / p50 script): {ratio:.2f}; added per run: {statistics.median(runs) - statistics.median(baselines):.0f} ms")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
