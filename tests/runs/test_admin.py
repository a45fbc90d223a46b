"""The admin shows the acting org's runs, their queue tasks and approvals, under the runs app."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.utils import timezone

from agents_site.vocabulary import ApprovalState, RunKind, RunStatus
from runs.models import Approval, Run, RunTask

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_client(org_a) -> Client:
    client = Client()
    assert client.post("/admin/login/?next=/admin/", {"username": org_a.user.username, "password": "pw"}).status_code == 302
    return client


def _records(org, name: str) -> None:
    now = timezone.now()
    with org.context():
        Run.objects.create(id=f"run_{name}", agent_name=name, kind=RunKind.RUN, status=RunStatus.QUEUED, created_at=now)
        RunTask.objects.create(run_id=f"run_{name}", task_id=f"task-{name}", created_at=now)
        Approval.objects.create(id=f"apr_{name}", run_id=f"run_{name}", session_id="ses_x", tool_call_id="c1",
                                tool_name=f"tool_{name}", state=ApprovalState.PENDING, created_at=now)


def test_the_moved_models_are_registered_with_the_admin_under_runs():
    assert all(admin.site.is_registered(model) for model in (Run, RunTask, Approval))
    assert {m._meta.app_label for m in (Run, RunTask, Approval)} == {"runs"}


def test_an_org_admin_sees_only_their_orgs_runs_tasks_and_approvals(org_a, org_b, admin_client):
    _records(org_a, "of_a")
    _records(org_b, "of_b")

    for path, mine, theirs in (("run", b"run_of_a", b"run_of_b"), ("runtask", b"task-of_a", b"task-of_b"),
                               ("approval", b"tool_of_a", b"tool_of_b")):
        page = admin_client.get(f"/admin/runs/{path}/")
        assert page.status_code == 200, path
        assert mine in page.content and theirs not in page.content, path
    assert admin_client.get("/admin/agents/run/").status_code == 404  # the old address is gone with the move
