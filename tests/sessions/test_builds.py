"""The public builds gallery and commit provenance (spec 003: /v1/agents/builds…; reference §2.5, §7.3)."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from django.test import Client

from sessions import builds, services
from sessions.models import Session
from sessions.provenance import VERIFY_COMMAND, Link, parse_links
from tenancy import stores
from tenancy.models import Org
from tests.sessions.conftest import append, new_session, patch

BUILDS = "/v1/agents/builds"


def _publish(org, project: str, **extra) -> dict:
    session = new_session(org, project=project, **extra)
    answer = patch(org.client, f"/v1/agents/sessions/{session['id']}", {"published": True})
    assert answer.status_code == 200
    return answer.json()


def test_a_build_is_invisible_until_published_then_readable_by_anyone(org_a):
    session = new_session(org_a, project="shop", title="the shop", repo="github.com/acme/shop", status="running")
    append(org_a, session["id"], "message", {"text": "build a shop", "model": "test-model"})
    append(org_a, session["id"], "tool-call", {"text": "wrote cart.py", "commit": "9fceb02d0ae598e95dc970b74767f19372d61af8", "subject": "Add the cart"})
    append(org_a, session["id"], "log", ["not an object"])
    anonymous = Client()
    for client in (anonymous, org_a.client):
        hidden = client.get(f"{BUILDS}/{org_a.slug}/shop")
        assert hidden.status_code == 404
        assert hidden.json() == {"status": 404, "code": "not_found", "error": f"no published build for {org_a.slug}/shop"}
    assert anonymous.get(BUILDS).json() == {"builds": []}

    patch(org_a.client, f"/v1/agents/sessions/{session['id']}", {"published": True})
    response = anonymous.get(f"{BUILDS}/{org_a.slug}/shop")
    assert response.status_code == 200
    build = response.json()
    actor = f"{org_a.slug}/{org_a.user.username}"
    assert {k: build[k] for k in ("org", "project", "session", "title", "agent", "status", "repo", "model")} == {
        "org": org_a.slug, "project": "shop", "session": session["id"], "title": "the shop", "agent": "coder",
        "status": "running", "repo": "github.com/acme/shop", "model": "test-model",
    }
    assert "endedAt" not in build and build["startedAt"] == session["startedAt"]
    assert [{k: v for k, v in t.items() if k != "at"} for t in build["turns"]] == [
        {"turn": 1, "kind": "message", "actor": actor, "body": "build a shop"},
        {"turn": 2, "kind": "tool-call", "actor": actor, "body": "wrote cart.py", "commit": "9fceb02d0ae598e95dc970b74767f19372d61af8", "subject": "Add the cart"},
        {"turn": 3, "kind": "log", "actor": actor, "body": ""},
    ]
    assert build["verify"] == "git log --format='%x00%H%n%B%n%N' --notes=refs/notes/agents-provenance"
    index = anonymous.get(BUILDS).json()["builds"]
    assert index == [{
        "org": org_a.slug, "project": "shop", "session": session["id"], "title": "the shop", "agent": "coder", "status": "running",
        "repo": "github.com/acme/shop", "turns": 3, "startedAt": session["startedAt"], "endedAt": "",
        "url": f"/builds/{org_a.slug}/shop/{session['id']}/",
    }]


def test_only_published_root_sessions_with_a_project_appear(org_a):
    root = _publish(org_a, "shop")
    child = new_session(org_a, parentSessionId=root["id"], project="kid")
    patch(org_a.client, f"/v1/agents/sessions/{child['id']}", {"published": True})
    new_session(org_a, project="draft")
    anonymous = Client()
    assert [b["session"] for b in anonymous.get(BUILDS).json()["builds"]] == [root["id"]]
    assert anonymous.get(f"{BUILDS}/{org_a.slug}/kid").status_code == 404
    assert anonymous.get(f"{BUILDS}/{org_a.slug}/draft").status_code == 404


def test_the_newest_published_root_of_a_project_is_the_build(org_a):
    _publish(org_a, "shop", title="first try")
    second = _publish(org_a, "shop", title="second try")
    assert Client().get(f"{BUILDS}/{org_a.slug}/shop").json()["session"] == second["id"]


def test_builds_are_keyed_by_org(org_a, org_b):
    mine = _publish(org_a, "shop", title="a's shop")
    theirs = _publish(org_b, "shop", title="b's shop")
    anonymous = Client()
    assert anonymous.get(f"{BUILDS}/{org_a.slug}/shop").json()["session"] == mine["id"]
    assert anonymous.get(f"{BUILDS}/{org_b.slug}/shop").json()["session"] == theirs["id"]
    index = anonymous.get(BUILDS).json()["builds"]
    assert {(b["org"], b["session"]) for b in index} == {(org_a.slug, mine["id"]), (org_b.slug, theirs["id"])}


def test_the_index_is_most_recently_updated_first_and_bounded(org_a, org_b):
    older = _publish(org_a, "shop")
    newer = _publish(org_b, "blog")
    anonymous = Client()
    assert [b["session"] for b in anonymous.get(BUILDS).json()["builds"]] == [newer["id"], older["id"]]
    append(org_a, older["id"], payload={"text": "a new turn"})  # an append stamps updated_at
    assert [b["session"] for b in anonymous.get(BUILDS).json()["builds"]] == [older["id"], newer["id"]]
    assert len(anonymous.get(BUILDS, {"limit": 1}).json()["builds"]) == 1
    assert len(anonymous.get(BUILDS, {"limit": 0}).json()["builds"]) == 2


def test_the_public_routes_never_create_an_org_store(db):
    ghost = Org.objects.create(slug="ghost-org-builds", name="ghost")
    anonymous = Client()
    for path in (f"{BUILDS}/{ghost.slug}/shop", f"{BUILDS}/nobody-here/shop", f"{BUILDS}/Not_A_Slug/shop"):
        response = anonymous.get(path)
        assert response.status_code == 404 and response.json()["error"].startswith("no published build for ")
    assert anonymous.get(BUILDS).json() == {"builds": []}
    assert not stores.store_path(ghost.slug).exists() and not stores.store_path("nobody-here").exists()


def test_an_overlong_project_is_not_found(org_a):
    response = Client().get(f"{BUILDS}/{org_a.slug}/{'p' * 129}")
    assert response.status_code == 404 and response.json()["error"] == "build not found"


def test_a_build_shows_at_most_its_first_turns(org_a, monkeypatch):
    monkeypatch.setattr(builds, "MAX_TURNS", 3)
    session = _publish(org_a, "shop")
    with org_a.context():
        for n in range(5):
            services.session_append_event(session_id=session["id"], kind="message", payload={"text": f"turn {n}"}, actor="t")
    turns = Client().get(f"{BUILDS}/{org_a.slug}/shop").json()["turns"]
    assert [t["body"] for t in turns] == ["turn 0", "turn 1", "turn 2"]
    with org_a.context():
        assert Session.objects.get(pk=session["id"]).last_seq == 5


# --- provenance -------------------------------------------------------------------------


def _git(repo, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _commit(repo, name: str, message: str) -> str:
    (repo / name).write_text(name)
    _git(repo, "add", name)
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def test_the_verify_command_rederives_every_binding_from_a_real_repository(tmp_path, org_a):
    repo = tmp_path / "shop"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "agent@example.com")
    _git(repo, "config", "user.name", "Agent")
    sid = "sess_" + "a" * 32
    first = _commit(repo, "a.txt", f"Add a\n\nAgents-Session: {sid}\nAgents-Turn: 1\n")
    _commit(repo, "b.txt", "Add b by hand\n\nNo trailers here.")
    retold = _commit(repo, "c.txt", f"Add c\n\nAgents-Session: {sid}\nAgents-Turn: 2\nAgents-Turn: 3\n")
    noted = _commit(repo, "d.txt", "Add d")
    _git(repo, "notes", "--ref=refs/notes/agents-provenance", "add", "-m", f"Agents-Session: {sid}\nAgents-Turn: 4", noted)
    _commit(repo, "e.txt", f"Add e\n\nAgents-Session: {sid}\nAgents-Turn: 0\n")
    _commit(repo, "f.txt", "Add f\n\nAgents-Turn: 6\n")
    _commit(repo, "g.txt", f"Add g\n\nAgents-Session: {'s' * 129}\nAgents-Turn: 7\n")

    session = _publish(org_a, "shop")
    verify = Client().get(f"{BUILDS}/{org_a.slug}/shop").json()["verify"]
    assert verify == VERIFY_COMMAND
    output = subprocess.run(shlex.split(verify), cwd=repo, check=True, capture_output=True, text=True).stdout
    assert parse_links(output) == [Link(noted, sid, 4), Link(retold, sid, 3), Link(first, sid, 1)]
    assert session["project"] == "shop"


def test_parse_links_needs_a_sha_and_both_trailers_and_lets_the_last_win():
    sha = "0123456789abcdef0123456789abcdef01234567"
    output = (
        f"\x00{sha}\nmsg\n\nAgents-Session: sess_1\nAgents-Turn: 2\n\nagents-session: sess_2\n"
        "\x00nothex\nAgents-Session: sess_3\nAgents-Turn: 1\n"
        "\x00abc12\nAgents-Session: sess_4\nAgents-Turn: 1\n"  # 5 hex: too short
        f"\x00{sha[:7]}\nAgents-Session: sess_5\nAgents-Turn: x\n"
    )
    assert parse_links(output) == [Link(sha, "sess_2", 2)]
    assert parse_links("") == []


@pytest.mark.parametrize("turn", ["-1", "0", "1.5", "٣"])
def test_parse_links_refuses_a_turn_that_is_not_a_positive_integer(turn):
    assert parse_links(f"\x00{'a' * 40}\nAgents-Session: sess_1\nAgents-Turn: {turn}\n") == []
