"""Every example of the documentation runs against a live `make demo` server and prints its answer.

One server for the whole file (`manage.py serve --demo`, what `make demo` runs: daphne, a
django-q2 cluster and the demo gateway, on a fresh data directory and free ports). Each page's
examples then run in order (scripts/docs/examples.py says how a page marks them): its shell
examples in one bash session (`set -euo pipefail`, variables carry from block to block), its
Python examples with the project's Python, in a scratch directory that holds links to the
clone's `manage.py`, `.venv` and `sdk`. Every session gets the variables getting-started sets:
`S` (the server), `KEY` (the demo org's API key), `H` (`Authorization: Bearer $KEY`) and `J`
(`Content-Type: application/json`); the pages' literal `http://127.0.0.1:8000`, `ak_…` and `/srv/git` are
replaced by the test server's address, key and repository folder (the server runs with
`AGENTS_REPO_FILE_ROOTS` at that folder, as the coding guide asks).

An example fails when it exits non-zero, when it prints something its answer block does not
show, or when a `curl` in it gets an HTTP status ≥ 400 and it has no answer block to show what
it answered. Examples titled `illustrative: …` are listed, never run, and at most 10 % of all.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from scripts.docs import examples
from tests.support.live import ROOT, free_port

#: The pages the issue names: every example there must run (none illustrative).
MUST_RUN = ("getting-started.md", "guides/runs-and-sessions.md", "guides/chat.md", "guides/openai-compatible.md",
            "guides/approvals.md", "guides/webhooks.md", "guides/identity-and-sdks.md")
#: Every page `make test-docs` runs (AGENTS_DOCS_EXAMPLES=all): getting started first, the guides assume its
#: state (the agent `writer`); then every other page, by path. `make test` runs the MUST_RUN pages only: the
#: suite's budget (issue 47 item 3) gives every other page's examples their own target, which CI runs too.
ALL_PAGES = sorted((p for p in examples.pages() if any(not b.illustrative and not b.is_server for b in examples.examples(p))),
                   key=lambda p: (p.name != "getting-started.md", str(p)))
PAGES = ALL_PAGES if os.environ.get("AGENTS_DOCS_EXAMPLES", "").strip().lower() == "all" else [
    p for p in ALL_PAGES if str(p.relative_to(examples.DOCS)) in MUST_RUN]
STATUS = "docs-example-curl-status"
RECORDS = "benchmarks/history.md"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Start `manage.py serve --demo` on a fresh data directory; yield {url, key, banner, env}; stop it."""
    data = tmp_path_factory.mktemp("docs-demo")
    (data / "git").mkdir()
    port, gateway = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTS_", "INFERENCE_", "DATABASE_URL", "REDIS_URL", "DJANGO_", "PYTEST_", "CLOUD_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "agents_site.settings", "AGENTS_DATA_DIR": str(data / "data"), "PYTHONUNBUFFERED": "1",
                "PORT": str(port), "AGENTS_DEMO_GATEWAY_PORT": str(gateway),
                # what the coding guide asks of the server: `file:` clone URLs under its /srv/git
                "AGENTS_REPO_FILE_ROOTS": str(data / "git")})
    process = subprocess.Popen([sys.executable, "manage.py", "serve", "--demo"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    banner = threading.Event()

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if "Serving on http://" in line:
                banner.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert banner.wait(240), "".join(lines)
        text = "".join(lines)
        yield {"url": f"http://127.0.0.1:{port}", "gateway": gateway, "key": re.search(r"API key:\s+(ak_\w+)", text).group(1),
               "password": re.search(r"login: admin / (\S+)", text).group(1), "banner": text,
               "git": str(data / "git"), "env": {k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "AGENTS_DATA_DIR")}}
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        reader.join(timeout=10)


def substitute(code: str, demo: dict) -> str:
    """Return `code` with the pages' address and key placeholders replaced by the test server's."""
    return (code.replace("http://127.0.0.1:8000", demo["url"]).replace("127.0.0.1:8001", f"127.0.0.1:{demo['gateway']}")
            .replace("ak_…", demo["key"]).replace("/srv/git", demo["git"]))


def script(page_examples: list[examples.Block], demo: dict, out: Path) -> str:
    """Return the bash script running a page's examples in order; block i writes out/i.{out,err,done}."""
    lines = [
        "set -euo pipefail",
        # Every curl also reports its status on stderr, so a refusal without an answer block fails its example.
        f"curl() {{ command curl --write-out '%{{stderr}}{STATUS} %{{http_code}}\\n' \"$@\"; }}",
    ]
    for i, block in enumerate(page_examples):
        code = substitute(block.code, demo)
        if block.lang in examples.PYTHON:
            marker = "PYTHON_EXAMPLE_END"
            code = f"{shlex.quote(str(ROOT / '.venv' / 'bin' / 'python'))} - <<'{marker}'\n{code}{marker}\n"
        lines += [f"echo {i} > {out}/current", "{", code, f"}} > {out}/{i}.out 2> {out}/{i}.err", f"touch {out}/{i}.done"]
    return "\n".join(lines) + "\n"


def scratch(tmp_path: Path) -> Path:
    """Return a scratch directory that looks like the clone's root to the examples (links, not copies)."""
    work = tmp_path / "clone"
    work.mkdir()
    for name in ("manage.py", ".venv", "sdk", "docs", "Makefile"):
        (work / name).symlink_to(ROOT / name)
    return work


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(examples.DOCS)) for p in PAGES])
def test_the_pages_examples_run_and_print_their_answers(demo, page, tmp_path):
    runnable = [b for b in examples.examples(page) if not b.illustrative and not b.is_server]
    out = tmp_path / "out"
    out.mkdir()
    work = scratch(tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8", "PYTHONPATH": f"{ROOT}:{ROOT / 'sdk' / 'python'}",
           "TMPDIR": str(tmp_path), **demo["env"], "S": demo["url"], "KEY": demo["key"],
           "H": f"Authorization: Bearer {demo['key']}", "J": "Content-Type: application/json"}
    (tmp_path / "page.sh").write_text(script(runnable, demo, out))
    done = subprocess.run(["bash", str(tmp_path / "page.sh")], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    failures = []
    for i, block in enumerate(runnable):
        printed = (out / f"{i}.out").read_text() if (out / f"{i}.out").exists() else ""
        stderr = (out / f"{i}.err").read_text() if (out / f"{i}.err").exists() else ""
        statuses = [int(s) for s in re.findall(rf"^{STATUS} (\d+)$", stderr, re.M)]
        errors = "\n".join(line for line in stderr.splitlines() if not line.startswith(STATUS))
        if not (out / f"{i}.done").exists():
            failures.append(f"{block.where}: exited {done.returncode}\n--- printed:\n{printed[-2000:]}\n--- stderr:\n{errors[-2000:]}")
            break
        if block.answer is not None:
            expected = substitute(block.answer.code, demo)
            if not examples.matches(expected, printed):
                failures.append(f"{block.where}: printed\n{printed[-3000:]}\n--- but its answer ({block.answer.where}) shows\n{expected}")
        elif any(s >= 400 for s in statuses):
            failures.append(f"{block.where}: a curl got HTTP {statuses} and the example has no answer block\n--- printed:\n{printed[-2000:]}")
    assert not failures, "\n\n".join(failures)


def test_the_server_example_is_what_this_test_runs_and_its_banner_is_the_servers(demo):
    servers = [b for b in examples.examples() if b.is_server]
    assert [b.page for b in servers] == ["getting-started.md"]
    assert servers[0].code.strip() == "make demo"
    assert servers[0].answer is not None and examples.matches(substitute(servers[0].answer.code, demo), demo["banner"]), demo["banner"]


def test_illustrative_examples_are_listed_and_at_most_a_tenth_of_all():
    # The benchmarks' history records the commands of measurements already taken (minutes to half an
    # hour each): listed, never run, and outside the share, which is about the pages that teach.
    every = [b for b in examples.examples() if b.page != RECORDS]
    illustrative = [b for b in every if b.illustrative]
    listing = "\n".join(f"  {b.where}  {b.title}" for b in illustrative)
    records = [b for b in examples.examples() if b.page == RECORDS and b.illustrative]
    print(f"\n{len(illustrative)} illustrative of {len(every)} examples:\n{listing}\n{len(records)} in {RECORDS}")
    assert len(illustrative) <= examples.MAX_ILLUSTRATIVE * len(every), listing
    assert records and all(b.illustrative for b in examples.examples() if b.page == RECORDS), "every history block is a record"
    assert all(b.title.startswith("illustrative: ") and len(b.title) > len("illustrative: ") + 5 for b in illustrative), (
        "an illustrative example says why it is not run: title=\"illustrative: <why>\"")
    for page in MUST_RUN:
        assert not [b for b in examples.examples(examples.DOCS / page) if b.illustrative], f"{page}'s examples must all run"


def test_every_excerpt_is_in_the_file_it_names(tmp_path):
    excerpts = [b for p in examples.pages() for b in examples.blocks(p) if b.excerpt_of is not None]
    assert [problem for b in excerpts for problem in examples.excerpt_problems(b)] == []
    changed = examples.Block(page="x.md", line=1, lang="python", title="excerpt: chat/apps.py",
                             code="register_run_policy(RunPolicy(kind=RunKind.CHAT, resume=run_elsewhere,\n")
    assert examples.excerpt_problems(changed) == [
        "x.md:1: 'register_run_policy(RunPolicy(kind=RunKind.CHAT, resume=run_elsewhere,' is not in chat/apps.py (after the excerpt's previous line)"]


def test_an_answer_that_disagrees_fails_and_ellipses_match_anything():
    assert examples.matches('{"status": "ok", …}', '{"status":"ok","output":"You said: hi"}')
    assert examples.matches("You said: …", "You said: Say hi\n")
    assert not examples.matches('{"status": "error", …}', '{"status":"ok","output":"You said: hi"}')
    assert not examples.matches("42", "42 and more")
