"""A routed coding run on a machine running `python -m runner` (issue 14 item 5): the runner
clones with its own access, runs the same tools (bubblewrap here), commits with the trailers,
pushes, streams its events into the session and reports; the server settles the run."""

from __future__ import annotations

import json
import subprocess

import pytest

from runs.models import Run
from coding.sandbox import get_sandbox
from sessions.models import Event
from sessions.provenance import parse_links
from tests.coding.conftest import git
from tests.runner.test_daemon import inference_env, targets_of, wait_until
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed")]


@pytest.fixture
def bare_remote(tmp_path, settings):
    root = tmp_path / "remotes"
    root.mkdir()
    settings.AGENTS_REPO_FILE_ROOTS = [str(root)]
    bare = root / "shop.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git("init", "-q", "-b", "main", str(seed))
    (seed / "README.md").write_text("# shop\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "seed", cwd=seed)
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=seed)
    return bare


def test_a_routed_coding_run_is_pushed_by_the_machine_with_provenance(org_a, daphne_server, upstream, runner_factory, bare_remote, settings):
    from billing.services import credit_add

    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=1000, actor="test")
    assert org_a.client.post("/v1/agents/repos", {"repo": "acme/shop", "cloneUrl": f"file://{bare_remote}"},
                             content_type="application/json").status_code == 201
    upstream.script(
        Reply(content="Add a test", tool_calls=[("write_file", {"path": "t.py", "content": "print('PASSED')\n"})]),
        Reply(tool_calls=[("run", {"command": "python3 t.py"})]),
        Reply(tool_calls=[("finish", {"summary": "added t.py"})]),
    )
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    assert target.spec["sandbox"] == "bubblewrap"
    from targets.models import ClaimKey

    def serving():
        with org_a.context():
            return ClaimKey.objects.filter(target_id=target.id, serving_at__isnull=False).exists()

    wait_until(serving, what="the first claim")
    started = org_a.client.post("/v1/agents/coding", {"repo": "acme/shop", "prompt": "add a test", "targetId": target.id},
                                content_type="application/json")
    assert started.status_code == 202, started.content
    body = started.json()

    def finished():
        with org_a.context():
            row = Run.objects.get(pk=body["runId"])
        return row if row.status not in ("queued", "running") else None

    row = wait_until(finished, timeout=180, what="the routed coding run to finish")
    assert row.status == "ok", (row.error, runner.log()[-2000:])
    assert body["branch"] in row.output
    links = parse_links(git("--git-dir", str(bare_remote), "log", "--format=%x00%H%n%B%n%N", body["branch"]))
    with org_a.context():
        events = list(Event.objects.filter(session_id=body["sessionId"]).order_by("seq"))
    tool_calls = [e for e in events if e.kind == "tool-call"]
    assert [json.loads(e.payload)["name"] for e in tool_calls] == ["write_file", "run", "finish"]
    assert "PASSED" in json.loads(tool_calls[1].payload)["result"]
    assert [(l.session, l.turn) for l in links] == [(body["sessionId"], tool_calls[0].seq)]
    assert [e.kind for e in events].count("commit") == 1
    view = org_a.client.get(f"/v1/agents/coding/{body['runId']}").json()
    assert view["changed"] is True and view["pushed"] is True and view["commitSha"] == links[0].commit
    assert runner.terminate() == 0


def _record(org, body: dict) -> dict:
    """A coding run's record with what differs by nature (ids, shas, times, where it ran) taken out."""
    view = org.client.get(f"/v1/agents/coding/{body['runId']}").json()
    with org.context():
        events = list(Event.objects.filter(session_id=body["sessionId"]).order_by("seq"))
    seqs = {e.seq: i for i, e in enumerate(events)}
    payloads = [json.loads(e.payload) for e in events]
    final = payloads[-1]
    return {
        "view": {k: v for k, v in view.items() if k not in ("runId", "sessionId", "branch", "commitSha", "createdAt", "targetId", "commits")},
        "commits": [(c["subject"], c["diffstat"], seqs[c["turn"]]) for c in view["commits"]],
        "kinds": [e.kind for e in events],
        "tools": [(p["name"], p["arguments"], p["result"], p["error"]) for e, p in zip(events, payloads) if e.kind == "tool-call"],
        "told": [(p["refused"], p["text"]) for e, p in zip(events, payloads) if e.kind == "log" and "refused" in p],
        "commitEvents": [sorted(p) for e, p in zip(events, payloads) if e.kind == "commit"],
        "finalKeys": sorted(k for k in final if k != "durationMs"),
        "final": {k: final[k] for k in ("status", "changed", "pushed", "diffstat", "summary", "error")},
        "finalCommits": [(c["subject"], c["diffstat"], seqs[c["turn"]]) for c in final["commits"]],
    }


def test_a_routed_runs_record_equals_a_server_runs_for_the_same_work(org_a, daphne_server, upstream, runner_factory, bare_remote, settings, tmp_path):
    from billing.services import credit_add
    from tests.coding.conftest import execute

    settings.CLOUD_AGENT_FEE_CENTS = 100
    settings.AGENTS_CODING_FEE_CENTS = -1
    settings.AGENTS_CODING_WORK_DIR = str(tmp_path / "work")
    settings.AGENTS_CODING_MAX_FILE_MB = 1  # the server's bound, and the routed claim's `limits`
    credit_add(org=org_a.org, cents=1000, actor="test")
    assert org_a.client.post("/v1/agents/repos", {"repo": "acme/shop", "cloneUrl": f"file://{bare_remote}"},
                             content_type="application/json").status_code == 201
    script = (
        Reply(content="Add calc", tool_calls=[("write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"})]),
        Reply(tool_calls=[("run", {"command": "python3 -c 'import calc; print(calc.add(2, 3))'"})]),
        Reply(tool_calls=[("run", {"command": "echo data > out.txt"})]),
        # Over the 1 MiB file bound with a finish beside it: not committed, the finish not accepted, one more turn.
        Reply(content="Add a sample", tool_calls=[("run", {"command": "head -c 1500000 /dev/zero > sample.bin"}),
                                                  ("finish", {"summary": "calc, out and a sample"})]),
        Reply(tool_calls=[("run", {"command": "rm sample.bin"}), ("finish", {"summary": "calc and out"})]),
    )
    upstream.script(*script)
    here = org_a.client.post("/v1/agents/coding", {"repo": "acme/shop", "prompt": "add calc"}, content_type="application/json").json()
    assert execute(org_a, here["runId"]) == "ok"

    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    from targets.models import ClaimKey

    wait_until(lambda: _serving(org_a, target.id, ClaimKey), what="the first claim")
    upstream.script(*script)
    routed = org_a.client.post("/v1/agents/coding", {"repo": "acme/shop", "prompt": "add calc", "targetId": target.id},
                               content_type="application/json").json()

    def finished():
        with org_a.context():
            row = Run.objects.get(pk=routed["runId"])
        return row if row.status not in ("queued", "running") else None

    row = wait_until(finished, timeout=180, what="the routed coding run to finish")
    assert row.status == "ok", (row.error, runner.log()[-2000:])
    server_record, routed_record = _record(org_a, here), _record(org_a, routed)
    assert server_record["final"]["pushed"] is True and len(server_record["commits"]) == 2
    assert [c[0] for c in server_record["commits"]] == ["Add calc", "Add out.txt"]
    assert [refused for refused, _ in server_record["told"]] == ["bounds", "finish"] and "sample.bin (1.4 MiB)" in server_record["told"][0][1]
    assert server_record["final"]["summary"] == "calc and out"
    for key in server_record:
        assert routed_record[key] == server_record[key], (key, server_record["kinds"], routed_record["kinds"])

    # A base the remote lacks: the machine checks it after its clone and ends the run at once.
    calls_before = len(upstream.chat_requests)
    missing = org_a.client.post("/v1/agents/coding", {"repo": "acme/shop", "prompt": "x", "targetId": target.id, "base": "no-such-branch"},
                                content_type="application/json")
    assert missing.status_code == 202  # a routed run's base is the machine's to check (it clones with its own access)
    routed = missing.json()
    row = wait_until(finished, timeout=120, what="the routed run with a missing base to end")
    assert row.status == "error" and row.error == "base_not_found: branch 'no-such-branch' does not exist in acme/shop"
    assert len(upstream.chat_requests) == calls_before  # no model turn was taken
    assert runner.terminate() == 0


def _serving(org, target_id, ClaimKey):
    with org.context():
        return ClaimKey.objects.filter(target_id=target_id, serving_at__isnull=False).exists()
def test_a_stop_that_says_push_kills_the_machines_command_and_pushes_the_commits_before_it(org_a, daphne_server, upstream, runner_factory,
                                                                                             bare_remote, settings):
    """Issue 25 on a machine: the stop reaches the runner while `sleep 60` runs in its sandbox; the
    tree is killed, no tool result is recorded for it, the report says stopped, and — the stop said
    `{"push": true}` — the commit made before it is pushed."""
    from billing.services import credit_add
    from targets.models import ClaimKey
    from tests.toolkit.test_sandbox import descendants, running

    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=1000, actor="test")
    assert org_a.client.post("/v1/agents/repos", {"repo": "acme/shop", "cloneUrl": f"file://{bare_remote}"},
                             content_type="application/json").status_code == 201
    upstream.script(
        Reply(content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(content="Test it", tool_calls=[("run", {"command": "echo started; sleep 60; echo never"})]),
        Reply(tool_calls=[("finish", {"summary": "never"})]),
    )
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)

    def serving():
        with org_a.context():
            return ClaimKey.objects.filter(target_id=target.id, serving_at__isnull=False).exists()

    wait_until(serving, what="the first claim")
    body = org_a.client.post("/v1/agents/coding", {"repo": "acme/shop", "prompt": "add a", "targetId": target.id},
                             content_type="application/json").json()
    tree = wait_until(lambda: (found := descendants(runner.proc.pid)) and any(n == "sleep" for n, _ in found.values()) and found,
                      timeout=180, what="sleep 60 to run on the machine")
    stopped = org_a.client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", {"push": True}, content_type="application/json")
    assert stopped.status_code == 200

    def finished():
        with org_a.context():
            row = Run.objects.get(pk=body["runId"])
        return row if row.status not in ("queued", "running") else None

    row = wait_until(finished, timeout=120, what="the report")
    wait_until(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), what="the tree to be gone")
    assert (row.status, row.finish_reason) == ("error", "stopped") and row.error.startswith("stopped"), row.error
    assert len(upstream.chat_requests) == 2
    with org_a.context():
        names = [json.loads(e.payload)["name"] for e in Event.objects.filter(session_id=body["sessionId"], kind="tool-call")]
    assert names == ["write_file"]  # no result for the killed command
    assert body["branch"] in git("--git-dir", str(bare_remote), "branch", "--list")
    # After the stop only the run's end: the push the stop asked for, then the summary, which
    # keeps what the killed command printed (the machine posts no event of its own for it).
    with org_a.context():
        after = [(e.kind, json.loads(e.payload)) for e in Event.objects.filter(session_id=body["sessionId"], seq__gt=stopped.json()["event"]["seq"]).order_by("seq")]
    assert [kind for kind, _ in after] == ["log", "log"], after
    assert after[0][1]["text"].startswith(f"pushed {body['branch']}")
    assert after[1][1]["runId"] == body["runId"] and after[1][1]["pushed"] is True
    assert after[1][1]["stoppedCommand"] == {"name": "run", "command": "echo started; sleep 60; echo never", "output": "started\n"}
    assert runner.terminate() == 0
