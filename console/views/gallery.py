"""The public build gallery (no login): published builds and one build turn by turn.

Reads `sessions.builds` — the same functions behind `GET /v1/agents/builds` and
`/v1/agents/builds/{org}/{project}` — so the page shows only what the public API shows:
published root sessions with a project; an unpublished or unknown build is the 404 page, and
no org store is ever created by a visit.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from agents_site.errors import ApiError
from sessions.builds import build_detail as read_build, builds_index, VERIFIER_FILE
from toolkit import verify_build
from sessions.fields import PROJECT_PATTERN

GALLERY_LIMIT = 100


def build_list(request):
    """Show every org's published builds, most recently updated first (at most 100)."""
    builds = builds_index(limit=GALLERY_LIMIT)
    for build in builds:  # a project stored before the slug rule may hold anything: no link, never a 500
        ok = re.fullmatch(PROJECT_PATTERN, build.get("project") or "")
        build["url"] = reverse("gallery:build-session", kwargs={"org": build["org"], "project": build["project"],
                                                             "session_id": build["session"]}) if ok else ""  # each build its own page
    return render(request, "console/gallery/list.html", {"builds": builds})


def verifier(request):
    """Answer the one-file build verifier (`toolkit/verify_build.py`, byte for byte) as a download.

    Python's standard library and `git` only: `python3 agents-verify.py <build URL> --repo .` in a
    clone of any repository verifies a build's commits (exit 0, 1 on a mismatch, 2 when a side
    cannot be read). No login; the build pages' recipe fetches it.
    """
    response = HttpResponse(Path(verify_build.__file__).read_bytes(), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{VERIFIER_FILE}"'
    response["Cache-Control"] = "no-cache"
    return response


def build_detail(request, org: str, project: str, session_id: str | None = None):
    """Show one published build (the project's latest, or `session_id`): its summary, every turn with
    its tool call and the commits it made (subject, sha, diffstat, diff), the branch and head, the
    project's other builds and the `verify` recipe."""
    try:
        build = read_build(org=org, project=project, session_id=session_id, origin=request.build_absolute_uri("/"))
    except ApiError as exc:
        raise Http404(exc.message) from exc
    return render(request, "console/gallery/detail.html", {"build": build, "turns": nest_commits(build["turns"])})


def nest_commits(turns: list[dict]) -> list[dict]:
    """Return `turns` with each commit turn moved under the turn that made it (`forTurn`) as `commits`.

    A commit whose turn is not among `turns` stays in its own place.
    """
    by_seq = {t["turn"]: {**t, "commits": []} for t in turns}
    shown = []
    for turn in turns:
        owner = by_seq.get(turn.get("forTurn")) if turn.get("kind") == "commit" else None
        if owner is not None and owner is not by_seq[turn["turn"]]:
            owner["commits"].append(turn)
        else:
            shown.append(by_seq[turn["turn"]])
    return shown
