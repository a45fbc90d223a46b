"""The claim long-poll against real daphne processes (and Redis for cross-process wake-ups)."""

from __future__ import annotations

import concurrent.futures
import contextlib

import httpx
import pytest

from agents_site.settings import redis_channel_layer
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
    target = httpx.post(server.url + "/v1/agents/targets", json={"label": "live"}, headers=headers, timeout=30).json()["id"]
    key = httpx.post(server.url + f"/v1/agents/targets/{target}/key", headers=headers, timeout=30).json()["claimKey"]
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
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
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


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Threads:"))


def test_200_waiting_claims_hold_no_thread_each(org_a):
    """A waiting claim is an awaitable on the channel layer: 200 of them leave the thread count small."""
    import asyncio
    import secrets

    from django.utils import timezone

    from targets.keys import CLAIM_KEY_PREFIX, hash_claim_key
    from targets.models import ClaimKey, Target

    n = 200
    now = timezone.now()
    machines = [(f"tgt_{i:032x}", CLAIM_KEY_PREFIX + secrets.token_hex(32)) for i in range(n)]
    with org_a.context():
        Target.objects.bulk_create([Target(id=t, owner=org_a.user.username, label=f"m{i}", created_at=now, updated_at=now) for i, (t, _) in enumerate(machines)])
        ClaimKey.objects.bulk_create([ClaimKey(target_id=t, key_hash=hash_claim_key(k), updated_at=now) for t, k in machines])

    def stamped() -> int:
        with org_a.context():
            return ClaimKey.objects.filter(serving_at__isnull=False).count()

    async def run(server) -> tuple[int, int, list[int]]:
        pid = server.proc.pid
        limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
            auth = {"Authorization": f"Bearer {org_a.key}"}
            assert (await client.get("/v1/agents/targets", headers=auth)).status_code == 200
            idle = _threads(pid)
            claims = [
                asyncio.create_task(client.post(f"/v1/agents/targets/{t}/claim", headers={**auth, "X-Target-Key": k}))
                for t, k in machines
            ]
            while await asyncio.to_thread(stamped) < n:  # every claim passed its proofs and is waiting
                done = [c for c in claims if c.done()]
                assert not done, done[0].result().text
                await asyncio.wait(claims, timeout=0.2)
            samples = []
            for _ in range(10):  # the claims keep waiting while the count is read
                samples.append(_threads(pid))
                finished, _ = await asyncio.wait(claims, timeout=0.1)
                assert not finished
            await asyncio.to_thread(offer, org_a, machines[7][0], "run_threads")
            answered = await claims[7]
            for task in claims:
                task.cancel()
            await asyncio.gather(*claims, return_exceptions=True)
            return idle, answered.status_code, samples

    with daphne(AGENTS_CLAIM_WAIT_SECONDS=90) as server:
        idle, status, samples = asyncio.run(run(server))
    assert status == 200  # the waiting claims were live: an offer woke its claim at once
    assert max(samples) <= idle + 8, (idle, samples)  # not one thread per claim: 200 claims, a few shared threads
