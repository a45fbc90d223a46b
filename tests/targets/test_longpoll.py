"""The claim long-poll in one event loop: wake-ups on the channel layer, one winner, no polling.

These run the async claim view through Django's ASGI handler on the test's loop (the way
daphne runs it); `tests/targets/test_live.py` repeats the essentials against real daphne.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from asgiref.sync import sync_to_async as _sync_to_async
from django.db import connections
from django.test import AsyncClient

from targets import mailbox, wake
from targets.models import RoutedRun
from tests.targets.conftest import offer, post

GATHERED_WITHIN = 60  # seconds: a hang is a failure, never a stuck suite

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def closing(func):
    """Return `func` made to close its thread's database connections when it returns.

    A worker thread keeps the connection it opened; on PostgreSQL that is a slot of the pool
    held until the process ends (four such threads starved later tests of the default pool).
    """

    def run(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        finally:
            connections.close_all()

    return run


def sync_to_async(func):
    """Run test-side sync code off the request's thread (thread-sensitive calls would queue behind it)."""
    return _sync_to_async(closing(func), thread_sensitive=False)

# A window far longer than any assertion waits for: an answer well inside it came from a wake-up.
LONG_WAIT = 60.0
# The window of tests where the losing claims must end by themselves (204): all claims are
# waiting before the offers go out, so this only bounds how long the losers take to answer.
SHORT_WAIT = 4.0
WOKEN_WITHIN = 10.0


class Caller:
    """An async client acting with one API key (AsyncClient keeps per-request headers only)."""

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.client = AsyncClient()


@pytest.fixture
def aclient(org_a):
    return Caller(org_a.key)


async def until_waiting(org, target_id: str, claims: list, n: int = 1) -> None:
    """Return once `n` claims on `target_id` are subscribed to its wake-ups (an offer now wakes them).

    Fails at once if a claim answered before, and after 30 s (a loaded machine is slow, never that slow).
    """
    deadline = asyncio.get_running_loop().time() + 30
    while wake.waiting_claims(org=org.slug, target_id=target_id) < n:
        assert not any(claim.done() for claim in claims), "a claim answered before it waited"
        assert asyncio.get_running_loop().time() < deadline, "the claims never started waiting"
        await asyncio.sleep(0.005)


async def aclaim(caller: Caller, target_id: str, key: str):
    headers = {"Authorization": f"Bearer {caller.api_key}", "X-Target-Key": key}
    return await caller.client.post(f"/v1/agents/targets/{target_id}/claim", content_type="application/json", headers=headers)


async def test_a_waiting_claim_is_woken_by_an_offer(settings, org_a, machine, aclient):
    settings.AGENTS_CLAIM_WAIT_SECONDS = LONG_WAIT
    target_id, key = machine
    waiting = asyncio.ensure_future(aclaim(aclient, target_id, key))
    await until_waiting(org_a, target_id, [waiting])
    assert not waiting.done()
    await sync_to_async(offer)(org_a, target_id, run_id="run_wake")
    r = await asyncio.wait_for(waiting, WOKEN_WITHIN)
    assert r.status_code == 200 and r.json()["runId"] == "run_wake"
    row = await sync_to_async(lambda: _state(org_a, "run_wake"))()
    assert row == "claimed"


async def test_a_waiting_claim_holds_up_neither_other_claims_nor_other_requests(settings, org_a, machine, aclient):
    settings.AGENTS_CLAIM_WAIT_SECONDS = LONG_WAIT
    target_id, key = machine
    first = asyncio.ensure_future(aclaim(aclient, target_id, key))
    await until_waiting(org_a, target_id, [first])
    second = asyncio.ensure_future(aclaim(Caller(org_a.key), target_id, key))
    await until_waiting(org_a, target_id, [first, second], n=2)  # a sync-only middleware once made this wait 60 s
    listed = await asyncio.wait_for(aclient.client.get("/v1/agents", headers={"Authorization": f"Bearer {org_a.key}"}), WOKEN_WITHIN)
    assert listed.status_code == 200 and not first.done() and not second.done()
    for claim in (first, second):
        claim.cancel()
    await asyncio.gather(first, second, return_exceptions=True)


async def test_an_offer_made_from_a_plain_thread_wakes_the_claim(settings, org_a, machine, aclient):
    settings.AGENTS_CLAIM_WAIT_SECONDS = LONG_WAIT
    target_id, key = machine
    waiting = asyncio.ensure_future(aclaim(aclient, target_id, key))
    await until_waiting(org_a, target_id, [waiting])
    import contextvars
    import threading

    thread = threading.Thread(target=contextvars.Context().run, args=(closing(offer), org_a, target_id), kwargs={"run_id": "run_thread"})
    thread.start()
    r = await asyncio.wait_for(waiting, WOKEN_WITHIN)
    thread.join()
    assert r.status_code == 200 and r.json()["runId"] == "run_thread"


async def test_two_concurrent_claimers_on_one_offer_exactly_one_wins(settings, org_a, machine):
    settings.AGENTS_CLAIM_WAIT_SECONDS = SHORT_WAIT
    target_id, key = machine
    clients = [Caller(org_a.key) for _ in range(2)]
    claims = [asyncio.ensure_future(aclaim(c, target_id, key)) for c in clients]
    await until_waiting(org_a, target_id, claims, n=2)
    await sync_to_async(offer)(org_a, target_id, run_id="run_once")
    answers = await asyncio.wait_for(asyncio.gather(*claims), GATHERED_WITHIN)
    assert sorted(r.status_code for r in answers) == [200, 204]
    assert [r.json()["runId"] for r in answers if r.status_code == 200] == ["run_once"]
    assert await sync_to_async(lambda: _state(org_a, "run_once"))() == "claimed"


@pytest.mark.skipif(os.environ.get("AGENTS_TEST_STORES") == "postgres",
                    reason="eight claims in the test process outnumber its PostgreSQL pool (4): the pass measured the "
                           "pool, not the claim; the live two-process tests hold claims on PostgreSQL")
async def test_many_concurrent_claimers_on_many_offers_win_each_offer_once(settings, org_a, machine):
    settings.AGENTS_CLAIM_WAIT_SECONDS = SHORT_WAIT
    target_id, key = machine
    clients = [Caller(org_a.key) for _ in range(8)]
    claims = [asyncio.ensure_future(aclaim(c, target_id, key)) for c in clients]
    await until_waiting(org_a, target_id, claims, n=8)
    for i in range(5):
        await sync_to_async(offer)(org_a, target_id, run_id=f"run_{i}", session_id=f"s_{i}")
    answers = await asyncio.wait_for(asyncio.gather(*claims), GATHERED_WITHIN)
    won = sorted(r.json()["runId"] for r in answers if r.status_code == 200)
    assert won == [f"run_{i}" for i in range(5)]
    assert sorted(r.status_code for r in answers) == [200] * 5 + [204] * 3


async def test_a_waiting_claim_reads_the_store_only_at_start_on_wake_and_at_the_end(settings, org_a, machine, aclient, monkeypatch):
    settings.AGENTS_CLAIM_WAIT_SECONDS = 1.5
    target_id, key = machine
    reads = []
    real = mailbox.routed_claim_next

    def counted(**kwargs):
        reads.append(kwargs["target_id"])
        return real(**kwargs)

    monkeypatch.setattr(mailbox, "routed_claim_next", counted)
    r = await aclaim(aclient, target_id, key)
    assert r.status_code == 204
    assert reads == [target_id, target_id]  # once at once, once when the window elapsed


async def test_rotating_the_key_ends_the_old_daemons_waiting_claim_with_403(settings, org_a, machine, aclient):
    settings.AGENTS_CLAIM_WAIT_SECONDS = LONG_WAIT
    target_id, old_key = machine
    waiting = asyncio.ensure_future(aclaim(aclient, target_id, old_key))
    await until_waiting(org_a, target_id, [waiting])
    await sync_to_async(lambda: post(org_a.client, f"/{target_id}/key"))()
    r = await asyncio.wait_for(waiting, WOKEN_WITHIN)
    assert r.status_code == 403 and r.json()["code"] == "claim_rejected"


async def test_deleting_the_machine_ends_its_waiting_claim_with_403(settings, org_a, machine, aclient):
    settings.AGENTS_CLAIM_WAIT_SECONDS = LONG_WAIT
    target_id, key = machine
    waiting = asyncio.ensure_future(aclaim(aclient, target_id, key))
    await until_waiting(org_a, target_id, [waiting])
    await sync_to_async(lambda: org_a.client.delete(f"/v1/agents/targets/{target_id}"))()
    r = await asyncio.wait_for(waiting, WOKEN_WITHIN)
    assert r.status_code == 403 and r.json()["code"] == "claim_rejected"


async def test_a_claim_cancelled_after_winning_gives_the_offer_back(settings, org_a, machine, monkeypatch):
    from targets import longpoll
    from tenancy import stores

    target_id, key = machine
    await sync_to_async(offer)(org_a, target_id, run_id="run_back")
    entered, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    real = mailbox.routed_claim_next

    def slow_claim(**kwargs):
        won = real(**kwargs)
        loop.call_soon_threadsafe(entered.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
        return won

    monkeypatch.setattr(mailbox, "routed_claim_next", slow_claim)

    async def run_claim():
        with stores.org_context(org_a.slug):
            return await longpoll.claim_wait(target_id=target_id, subject=org_a.user.username, is_org_admin=True, key=key, wait_seconds=5)

    task = asyncio.ensure_future(run_claim())
    await entered.wait()
    assert await sync_to_async(lambda: _state(org_a, "run_back"))() == "claimed"
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await sync_to_async(lambda: _state(org_a, "run_back"))() == "offered"


def _state(handle, run_id):
    with handle.context():
        return RoutedRun.objects.get(pk=run_id).state
