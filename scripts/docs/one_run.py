"""docs/architecture/one-run.md: the modules one run visits, from a traced run, so the walk cannot drift.

`page()` prepares a site (migrate, the demo org, an agent on the demo gateway), makes one warm-up
run, then traces the next `POST /v1/agents/writer/run` with `sys.setprofile`: every call into the
project's own modules, in the order each module was first entered, with the functions called in it.
The run goes through Django's test client, where a run's steps are driven blocking in the
request's thread (decision 0002): one thread, one order. Under daphne the same steps run on the
event loop and its step threads; the modules are the same. Work other threads do meanwhile (the
session bus's sender, the webhook pool) is not in the trace.

Call `page()` only in a process whose Django is configured on a throwaway data directory with the
demo gateway as its inference gateway (`scripts/docs/generate.py` does that).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture" / "one-run.md"
#: The project's own packages: a call into anything else (Django, the SDK, the standard library) is not listed.
PACKAGES = ("server", "agents_site", "tenancy", "billing", "sessions", "runs", "agents", "targets", "webhooks", "identity",
            "coding", "chat", "openai_api", "guide", "console", "toolkit")
AGENT = {"name": "writer", "instructions": "Answer in one line."}
INPUT = {"input": "Say hi"}
#: The run path in words: (module, function, what it does there). `render` refuses a landmark the
#: trace did not visit, so this paragraph cannot drift either.
LANDMARKS = (
    ("agents/api_runs.py", "run_agent", "the route"),
    ("agents/execution/service.py", "run_execute_steps", "executes the run in this process"),
    ("runs/lifecycle.py", "run_start", "accepts it through the one lifecycle: input, key, gate, row, session"),
    ("agents/execution/loop.py", "RunLoop.steps", "runs the agent loop"),
    ("toolkit/toolloop.py", "tool_loop", "the tool loop the runner runs too"),
    ("agents/execution/completion.py", "complete", "retries and failover around one completion"),
    ("agents/inference.py", "chat_completion", "one streamed completion from the gateway"),
    ("runs/lifecycle.py", "run_finish", "ends the run: outcome, span, summary, session closed"),
    ("billing/meter.py", "run_charge", "debits the fee the run held"),
    ("billing/services.py", "run_debit", "writes the ledger row, once per run"),
)
#: Frames that are a function's own expressions, not calls worth naming.
COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>"}
# Calls a run makes or not by timing alone: whether the pooled connection to the gateway was still
# open after the warm-up run (a loaded machine, or the gateway's keep-alive, closes it) decides
# whether the traced run connects anew. Left out so the page is the same on every machine.
BY_TIMING = {("toolkit/stopping.py", "WatchedBackend.connect_tcp"), ("toolkit/stopping.py", "_WatchedStream.__init__"),
             ("toolkit/stopping.py", "_WatchedStream.close")}


def _module_of(filename: str) -> str | None:
    """Return the repository path of `filename` when it is a module of the project's packages, else None."""
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if relative.parts[0] not in PACKAGES or "migrations" in relative.parts:
        return None
    return str(relative)


def trace(call) -> list[tuple[str, list[str]]]:
    """Run `call()` under a profiler of this thread; return [(module path, [function, …]), …] by first visit."""
    visits: dict[str, list[str]] = {}

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        module = _module_of(code.co_filename)
        if module is None:
            return
        name = code.co_qualname
        if name.rsplit(".", 1)[-1] in COMPREHENSIONS or (module, name) in BY_TIMING:
            return
        functions = visits.setdefault(module, [])
        if name not in functions:
            functions.append(name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return list(visits.items())


def summary(module: str) -> str:
    """Return the first line of `module`'s docstring (what it is), or ""."""
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def traced_run() -> tuple[list[tuple[str, list[str]]], dict]:
    """Prepare the site, make a warm-up run, trace a second run; return (visits, the run's answer)."""
    from io import StringIO
    import re

    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", interactive=False, verbosity=0)
    out = StringIO()
    call_command("bootstrap_demo", stdout=out)
    key = re.search(r"API key:\s+(ak_\w+)", out.getvalue()).group(1)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    created = client.post("/v1/agents", AGENT, content_type="application/json")
    if created.status_code != 201:
        raise RuntimeError(f"creating the agent answered {created.status_code}: {created.content[:300]!r}")
    warm = client.post(f"/v1/agents/{AGENT['name']}/run", INPUT, content_type="application/json")
    if warm.status_code != 200:
        raise RuntimeError(f"the warm-up run answered {warm.status_code}: {warm.content[:300]!r}")
    answers = []
    visits = trace(lambda: answers.append(client.post(f"/v1/agents/{AGENT['name']}/run", INPUT, content_type="application/json")))
    if answers[0].status_code != 200 or answers[0].json()["status"] != "ok":
        raise RuntimeError(f"the traced run answered {answers[0].status_code}: {answers[0].content[:300]!r}")
    return visits, answers[0].json()


def render(visits: list[tuple[str, list[str]]], run: dict) -> str:
    """Return the page for `visits` (from `trace`) of the run whose answer is `run`."""
    shown = {k: run[k] for k in ("status", "output", "kind", "model") if k in run}
    visited = dict(visits)
    for module, function, _ in LANDMARKS:
        if function not in visited.get(module, []):
            raise RuntimeError(f"the traced run did not call {module} {function}: update LANDMARKS in scripts/docs/one_run.py")
    packages: list[str] = []
    for module, _ in visits:
        package = module.split("/")[0]
        if package not in packages:
            packages.append(package)
    lines = [
        "# Following one run, module by module",
        "",
        "<!-- Generated by scripts/docs/generate.py (scripts/docs/one_run.py) from a traced run; do not edit. -->",
        "",
        f"One `POST /v1/agents/{AGENT['name']}/run` with `{json.dumps(INPUT)}` against the demo gateway",
        f"answered `{json.dumps(shown)}`.",
        f"Tracing that request (after one warm-up run, so caches are filled) found **{len(visits)} modules** of the",
        f"project in **{len(packages)} packages** (" + ", ".join(f"`{p}`" for p in packages) + "), listed below in",
        "the order the run first entered each, with the functions it called there in the order of their first call.",
        "",
        "How it was traced: Django's test client, where a run's steps are driven blocking in the request's",
        "thread, under `sys.setprofile` on that thread (`scripts/docs/one_run.py`). Under daphne the same",
        "steps wait on the event loop and run on its step threads",
        "([decision 0002](../decisions/0002-waiting-on-a-model-costs-no-thread.md)); the session bus's sender",
        "and the webhook pool work on their own threads and are not listed.",
        "`python scripts/docs/generate.py one-run` writes this page again; `tests/docs/test_one_run.py` fails",
        "when the code no longer takes this path.",
        "",
        "The landmarks, in the order the run reaches them (every kind of run starts and finishes through the",
        "same `run_start` and `run_finish`):",
        "",
        *[f"- `{module}` `{function}`: {words}" for module, function, words in LANDMARKS],
        "",
        "| # | module | what it is | functions called, in order |",
        "|---:|---|---|---|",
    ]
    for number, (module, functions) in enumerate(visits, 1):
        names = ", ".join(f"`{f}`" for f in functions)
        lines.append(f"| {number} | `{module}` | {summary(module).replace('|', chr(92) + '|')} | {names} |")
    lines.append("")
    return "\n".join(lines)


def page() -> str:
    """Trace one run on the configured site and return the page."""
    visits, run = traced_run()
    return render(visits, run)
