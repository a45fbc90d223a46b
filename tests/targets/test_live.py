"""The claim long-poll against real daphne processes (and Redis for cross-process wake-ups)."""

from __future__ import annotations

import concurrent.futures
import contextlib

import httpx
import pytest

from targets.models import RoutedRun
from tests.support.live import LiveServer
from tests.targets.conftest import offer

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = "redis://127.0.0.1:6379/9"


@contextlib.contextmanager
def daphne(**env):
    server = LiveServer({k: str(v) for k, v in env.items()}).start()
    try:
        yield server
    finally:
        server.stop()


def register(server, api_key) -> tuple[str, str]:
    headers = {"Authorization": f"Bearer {api_key}"}
    target = httpx.post(server.url + "/v1/agents/targets", json={"label": "live"}, headers=headers).json()["id"]
    key = httpx.post(server.url + f"/v1/agents/targets/{target}/key", headers=headers).json()["claimKey"]
    return target, key


def claim(server, api_key, target_id, key, timeout=90.0) -> httpx.Response:
    headers = {"Authorization": f"Bearer {api_key}", "X-Target-Key": key}
    return httpx.post(server.url + f"/v1/agents/targets/{target_id}/claim", headers=headers, timeout=timeout)


def test_daphne_answers_204_when_the_wait_elapses_with_no_work(org_a):
    with daphne(AGENTS_CLAIM_WAIT_SECONDS=1) as server:
        target_id, key = register(server, org_a.key)
        r = claim(server, org_a.key, target_id, key)
        assert r.status_code == 204 and r.content == b""
        refused = claim(server, org_a.key, target_id, "tgtk_" + "0" * 64)
        assert refused.status_code == 403 and refused.json()["code"] == "claim_rejected"


def test_daphne_gives_one_offer_to_exactly_one_of_two_concurrent_claimers(org_a):
    with daphne(AGENTS_CLAIM_WAIT_SECONDS=1.5) as server:
        target_id, key = register(server, org_a.key)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            claims = [pool.submit(claim, server, org_a.key, target_id, key) for _ in range(2)]
            offer(org_a, target_id, run_id="run_live")
            answers = [c.result() for c in claims]
    assert sorted(r.status_code for r in answers) == [200, 204]
    assert [r.json()["runId"] for r in answers if r.status_code == 200] == ["run_live"]
    with org_a.context():
        assert RoutedRun.objects.get(pk="run_live").state == "claimed"


def test_a_restart_between_offer_and_claim_keeps_the_offer(org_a):
    with daphne(AGENTS_CLAIM_WAIT_SECONDS=1) as first:
        target_id, key = register(first, org_a.key)
        offer(org_a, target_id, run_id="run_durable", payload={"input": "survive"})
    with daphne(AGENTS_CLAIM_WAIT_SECONDS=1) as second:
        r = claim(second, org_a.key, target_id, key)
    assert r.status_code == 200
    assert r.json() == {"runId": "run_durable", "sessionId": "sess_1", "input": "survive"}


def test_redis_carries_an_offer_made_in_another_process_to_a_claim_waiting_in_daphne(org_a, settings):
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [REDIS_URL]}}}
    with daphne(AGENTS_CLAIM_WAIT_SECONDS=60, REDIS_URL=REDIS_URL) as server:
        target_id, key = register(server, org_a.key)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(claim, server, org_a.key, target_id, key)
            with contextlib.suppress(concurrent.futures.TimeoutError):
                waiting.result(timeout=1.0)  # let the claim subscribe; it must still be waiting
            assert not waiting.done()
            offer(org_a, target_id, run_id="run_redis")
            r = waiting.result(timeout=10)  # far inside the 60 s window: woken, not timed out
    assert r.status_code == 200 and r.json()["runId"] == "run_redis"
