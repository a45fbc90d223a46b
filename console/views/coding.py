"""Coding pages: the org's coding runs, one coding run with its diff per commit, and the
machines page (registered machines, liveness, load, sandbox).

Reads only: coding runs come from `coding` (records and the run rows), machines from
`targets` (effective status and session load, exactly what `GET /v1/agents/targets` answers).
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render

from agents.models import Run
from coding.models import CodingRun
from console.access import member_required

LIST_LIMIT = 100


@member_required
def coding_run_list(request):
    """Show the org's newest coding runs (at most 100) with their run status."""
    codings = list(CodingRun.objects.order_by("-created_at")[:LIST_LIMIT])
    statuses = dict(Run.objects.filter(pk__in=[c.run_id for c in codings]).values_list("id", "status"))
    rows = [{"coding": c, "status": statuses.get(c.run_id, "")} for c in codings]
    return render(request, "console/coding/list.html", {"rows": rows, "nav": "coding"})


@member_required
def coding_run_detail(request, run_id: str):
    """Show one coding run: prompt, outcome, and each commit (subject, turn, diffstat, patch)."""
    coding = CodingRun.objects.filter(pk=run_id[:64]).first()
    if coding is None:
        raise Http404("coding run not found")
    run = Run.objects.filter(pk=coding.run_id).first()
    return render(request, "console/coding/detail.html", {"coding": coding, "run": run, "commits": coding.commits or [], "nav": "coding"})


@member_required
def machine_list(request):
    """Show the org's registered machines: effective status, last heartbeat, load, sandbox, sessions."""
    from targets import selectors
    from targets.presenters import target_view

    targets = selectors.target_list(limit=selectors.TARGETS_MAX_LIMIT).items
    load = selectors.session_load(targets)
    machines = [target_view(t, load=load[t.id]) for t in targets]
    return render(request, "console/machines.html", {"machines": machines, "nav": "machines"})
