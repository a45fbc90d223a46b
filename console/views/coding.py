"""Coding pages: the org's coding runs, one coding run with its diff per commit, and the
machines page (registered machines, liveness, load, sandbox).

Reads only: coding runs come from `coding` (records and the run rows), machines from
`targets` (effective status and session load, exactly what `GET /v1/agents/targets` answers).
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render

from runs import selectors as run_selectors
from agents_site.vocabulary import RunStatus
from coding import selectors as coding_selectors
from coding.models import CodingRun
from console.access import member_required
from console.views.gallery import nest_commits
from sessions.builds import event_turns
from sessions import selectors as session_selectors
from targets import selectors
from targets.presenters import target_view

LIST_LIMIT = 100
TURN_LIMIT = 1000


@member_required
def coding_run_list(request):
    """Show the org's newest coding runs (at most 100) with their run status."""
    codings = coding_selectors.coding_runs_recent(limit=LIST_LIMIT)
    statuses = run_selectors.run_statuses(run_ids=[c.run_id for c in codings])
    labels = selectors.target_labels(target_ids={c.target_id for c in codings if c.target_id})
    rows = [{"coding": c, "status": statuses.get(c.run_id, ""), "machine": labels.get(c.target_id, c.target_id)} for c in codings]
    return render(request, "console/coding/list.html", {"rows": rows, "nav": "coding"})


def _machine_label(target_id: str) -> str:
    """Return the label of machine `target_id` ("" for none; the id itself when it is gone)."""
    if not target_id:
        return ""

    return selectors.target_labels(target_ids={target_id}).get(target_id) or target_id


def coding_run_facts(coding: CodingRun) -> dict:
    """Return what the coding page shows, server and routed runs alike: the run, the session's turns
    (tool calls, commits nested under their turn), the commits made so far, the closing facts."""
    run = run_selectors.run_find(run_id=coding.run_id)
    events = session_selectors.session_log(session_id=coding.session_id, limit=TURN_LIMIT)
    turns, _, final = event_turns(events)
    commits = [{"sha": t["commit"], "subject": t.get("subject", ""), "turn": t.get("forTurn"), "diffstat": t.get("diffstat", ""),
                "patch": t.get("patch", "")} for t in turns if t["kind"] == "commit" and t.get("commit")]
    if not commits:
        commits = list(coding.commits or [])
    status = run.status if run else ""
    return {
        "coding": coding, "run": run, "status": status, "terminal": status in RunStatus.FINISHED,
        "turns": nest_commits(turns), "commits": commits, "final": final, "machine": _machine_label(coding.target_id),
        "changed": final.get("changed", coding.changed), "pushed": final.get("pushed", coding.pushed),
        "head": final.get("head") or coding.head_sha, "summary": final.get("summary", ""),
    }


@member_required
def coding_run_detail(request, run_id: str):
    """Show one coding run: prompt, machine (by label), every turn with its tool call and commits
    (subject, sha, diffstat, diff), summary, branch and head. `?part=live` answers only the part
    that changes, which the page re-reads every second while the run works."""
    coding = coding_selectors.coding_run_get(run_id=run_id[:64])
    if coding is None:
        raise Http404("coding run not found")
    context = {**coding_run_facts(coding), "nav": "coding"}
    if request.GET.get("part") == "live":
        return render(request, "console/coding/live.html", context)
    return render(request, "console/coding/detail.html", context)


@member_required
def machine_list(request):
    """Show the org's registered machines: effective status, last heartbeat, load, sandbox, sessions."""
    targets = selectors.target_list(limit=selectors.TARGETS_MAX_LIMIT).items
    load = selectors.session_load(targets)
    machines = [target_view(t, load=load[t.id]) for t in targets]
    return render(request, "console/machines.html", {"machines": machines, "nav": "machines"})
