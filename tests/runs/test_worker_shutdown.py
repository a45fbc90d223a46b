"""SIGTERM on a real `manage.py qcluster`: no new run, a grace for the run in flight, then exit."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from runs.background import run_submit
from runs.models import Run
from agents.services import AgentInput, agent_create
from runs.shutdown import WORKER_STOPPED
from agents_site.vocabulary import RunStatus
from sessions.models import Session
from tests.agents.conftest import debits, fund
from tests.support.qcluster import QCluster, wait_for
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

GRACE = 2


def _env(upstream) -> dict:
    return {
        "AGENTS_Q_WORKERS": "1",
        "AGENTS_SHUTDOWN_GRACE_SECONDS": str(GRACE),
        "INFERENCE_BASE_URL": upstream.base_url,
        "INFERENCE_API_KEY": "test-key",
        "AGENTS_DEFAULT_MODEL": "test-model",
    }


def _submit(org, text: str) -> Run:
    with org.context():
        agent = agent_create(data=AgentInput(name=f"bg-{text}"))
        return run_submit(agent=agent, input=text, actor=f"{org.slug}/tester")[0]


def _status(org, run_id: str) -> tuple[str, str]:
    with org.context():
        run = Run.objects.get(pk=run_id)
        return run.status, run.error


def _terminate_and_time(cluster: QCluster) -> float:
    started = time.monotonic()
    cluster.proc.terminate()
    try:
        cluster.proc.wait(timeout=GRACE + 30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the cluster did not exit\n{cluster.log()[-3000:]}") from None
    return time.monotonic() - started


def test_sigterm_ends_a_run_outlasting_the_grace_as_worker_stopped_and_the_cluster_exits(make_org, upstream, settings):
    org = make_org("stopq")
    fund(org, 1000)
    released = threading.Event()
    upstream.script(Reply(hold=released, content="too late"))
    cluster = QCluster(_env(upstream), name="qcluster-stop").start()
    try:
        run = _submit(org, "long")
        wait_for(lambda: _status(org, run.id)[0] == RunStatus.RUNNING and upstream.chat_requests, timeout=30,
                 message=f"the run to reach the model\n{cluster.log()[-3000:]}")
        waited = _terminate_and_time(cluster)
    finally:
        released.set()
        cluster.stop()
    assert waited < GRACE + 8, f"the cluster took {waited:.1f} s to exit\n{cluster.log()[-3000:]}"
    assert _status(org, run.id) == (RunStatus.ERROR, WORKER_STOPPED)
    with org.context():
        assert Session.objects.get(pk=run.session_id).status == "error"
    assert debits(org) == []
    assert len(upstream.chat_requests) == 1  # never re-run


def test_sigterm_lets_a_run_finishing_within_the_grace_finish_and_bill(make_org, upstream):
    org = make_org("graceq")
    fund(org, 1000)
    released = threading.Event()
    upstream.script(Reply(hold=released, content="made it"))
    cluster = QCluster(_env(upstream), name="qcluster-grace").start()
    try:
        run = _submit(org, "short")
        wait_for(lambda: upstream.chat_requests, timeout=30, message=f"the run to reach the model\n{cluster.log()[-3000:]}")
        cluster.proc.terminate()
        threading.Timer(GRACE / 4, released.set).start()  # the model answers within the grace (the clock under test, not a wait)
        cluster.proc.wait(timeout=GRACE + 30)
    finally:
        released.set()
        cluster.stop()
    assert _status(org, run.id) == (RunStatus.OK, "")
    assert [d.run_id for d in debits(org)] == [run.id]
