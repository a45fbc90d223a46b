"""Revocation reaches open connections (issue 25 item 3) on real daphne processes.

An SSE stream and a claim long-poll opened with an API key close once the key is revoked, the
member removed or the org deleted — on the embedded default (one daphne, in-memory layer: the
revocation is made in that process, over the console) and on two daphnes sharing Redis (the
revocation is made in this test process: only the broadcast can reach them). A connection of
another credential stays open and goes on receiving. The tests check the cause (the
`: credential revoked` comment, the 403) and the order, never a duration.
"""

from __future__ import annotations

import concurrent.futures
import re
import time

import httpx
import pytest
import redis

from agents_site.settings import redis_channel_layer
from sessions import services as session_services
from tenancy import revocation
from tenancy.models import ApiKey
from tenancy.services import api_key_create, api_key_revoke, membership_remove, membership_set, org_delete
from tests.sessions.sse import open_stream
from tests.support.live import LiveServer

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = "redis://127.0.0.1:6379/5"  # a database of its own
REVOKED = "the credential of this request was revoked while it was open"
SLOW = {"AGENTS_CLAIM_WAIT_SECONDS": "120", "AGENTS_SSE_PING_SECONDS": "0.3", "AGENTS_SSE_CATCHUP_SECONDS": "0.3"}


def _target(server, key) -> tuple[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    target = httpx.post(server.url + "/v1/agents/targets", json={"label": "live"}, headers=headers, timeout=10).json()["id"]
    claim_key = httpx.post(server.url + f"/v1/agents/targets/{target}/key", headers=headers, timeout=10).json()["claimKey"]
    return target, claim_key


def _claim(server, key, target, claim_key) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "X-Target-Key": claim_key}
    return httpx.post(server.url + f"/v1/agents/targets/{target}/claim", headers=headers, timeout=100)


def _opened(stream):
    assert stream.response.status_code == 200
    assert stream.next_frame().comment == "stream open"
    return stream


def _ends_revoked(stream) -> list:
    """Read `stream` to its end; return the event frames it carried (the end must be the revocation's)."""
    frames = []
    while True:
        frame = stream.next_frame()
        if frame is None:
            break
        frames.append(frame)
    assert frames and frames[-1].comment == "credential revoked", [f.comment or f.event for f in frames[-3:]]
    return [f for f in frames if f.event]


def _wait_claim_waiting(org, target) -> None:
    """Return once the claim passed its proofs (it stamps its key's `serving_at`): it is armed and waiting."""
    from targets.models import ClaimKey

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with org.context():
            if ClaimKey.objects.filter(target_id=target, serving_at__isnull=False).exists():
                return
        time.sleep(0.05)
    raise AssertionError("the claim never began")


def _console_login(server, user) -> httpx.Client:
    """Sign `user` in through the console's login form; return the client holding the session."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()  # the server's hashers do not read the tests' MD5 hashes
    user.password = hasher.encode("pw", hasher.salt(), iterations=1000)
    user.save(update_fields=["password"])
    username = user.get_username()
    client = httpx.Client(base_url=server.url, timeout=10)
    page = client.get("/console/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = client.post("/console/login/", data={"username": username, "password": "pw", "csrfmiddlewaretoken": token},
                         headers={"Referer": server.url + "/console/login/"})
    assert answer.status_code == 302, answer.text[:500]
    return client


def _append(org, session_id: str, text: str):
    with org.context():
        return session_services.session_append_event(session_id=session_id, kind="message", payload={"text": text}, actor="test")


def _session(org) -> str:
    with org.context():
        return session_services.session_create(agent="coder", actor="test").id


@pytest.fixture
def embedded(transactional_db):
    server = LiveServer(SLOW).start()
    yield server
    server.stop()


def test_revoking_a_key_in_the_console_closes_its_stream_and_long_poll_on_the_embedded_default(embedded, make_org):
    org = make_org("emb")
    _, other_key = api_key_create(org=org.org, user=org.user, name="other")
    target, claim_key = _target(embedded, org.key)
    session_id = _session(org)
    doomed = _opened(open_stream(embedded.url, org.key))
    kept = _opened(open_stream(embedded.url, other_key))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        claim = pool.submit(_claim, embedded, org.key, target, claim_key)
        _wait_claim_waiting(org, target)
        before = _append(org, session_id, "before")
        assert [f.id for f in doomed.collect(events=1, timeout=60)] == [before.position]
        console = _console_login(embedded, org.user)
        row = ApiKey.objects.get(org=org.org, name="")
        page = console.get("/console/keys/")
        token = console.cookies["csrftoken"]
        assert page.status_code == 200
        revoked = console.post(f"/console/keys/{row.pk}/revoke/", data={"csrfmiddlewaretoken": token},
                               headers={"Referer": embedded.url + "/console/keys/"})
        assert revoked.status_code == 302
        answer = claim.result(timeout=60)
    assert answer.status_code == 403
    assert answer.json() == {"status": 403, "code": "forbidden", "error": REVOKED}
    assert _ends_revoked(doomed) == []
    after = _append(org, session_id, "after")
    frames = kept.collect(events=2, timeout=60)
    assert [f.id for f in frames] == [before.position, after.position]  # the other key's stream lives on
    kept.close()
    refused = httpx.get(embedded.url + "/v1/agents/sessions/stream", headers={"Authorization": f"Bearer {org.key}"}, timeout=10)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"


@pytest.fixture(scope="module")
def _redis_pair(django_db_setup, django_db_blocker):
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {**SLOW, "REDIS_URL": REDIS_URL, "AGENTS_API_KEY_CACHE_SECONDS": "30"}  # a cached principal outlives a slow test
    servers = [LiveServer(env).start(), LiveServer(env).start()]
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def redis_pair(_redis_pair, transactional_db, settings):
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
    revocation.reset()
    assert revocation.start(wait_seconds=10)
    yield _redis_pair
    revocation.reset()


def test_a_key_revoked_in_another_process_closes_its_stream_and_long_poll_on_both_daphnes(redis_pair, make_org):
    first, second = redis_pair
    org = make_org("rk")
    _, other_key = api_key_create(org=org.org, user=org.user, name="other")
    target, claim_key = _target(second, org.key)
    doomed = _opened(open_stream(first.url, org.key))
    kept = _opened(open_stream(second.url, other_key))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        claim = pool.submit(_claim, second, org.key, target, claim_key)
        _wait_claim_waiting(org, target)
        api_key_revoke(org=org.org, key_id=ApiKey.objects.get(org=org.org, name="").pk)  # this process: Redis only
        answer = claim.result(timeout=60)
    assert answer.status_code == 403 and answer.json()["error"] == REVOKED
    assert _ends_revoked(doomed) == []
    session_id = _session(org)
    after = _append(org, session_id, "after")
    assert [f.id for f in kept.collect(events=2, timeout=60)][-1] == after.position  # the other key's stream lives on
    kept.close()


def test_removing_a_member_or_deleting_the_org_closes_their_streams_on_both_daphnes(redis_pair, make_org):
    first, second = redis_pair
    org = make_org("rm")
    member = membership_set(org=org.org, username=f"member-{org.slug}", password="pw").user
    _, member_key = api_key_create(org=org.org, user=member)
    member_streams = [_opened(open_stream(server.url, member_key)) for server in redis_pair]
    admin_stream = _opened(open_stream(second.url, org.key))
    membership_remove(org=org.org, user_id=member.pk)
    for stream in member_streams:
        assert _ends_revoked(stream) == []
    session_id = _session(org)
    live = _append(org, session_id, "still here")
    assert [f.id for f in admin_stream.collect(events=2, timeout=60)][-1] == live.position
    org_delete(org=org.org)
    _ends_revoked(admin_stream)


def test_a_cached_key_is_refused_on_both_daphnes_on_the_first_request_after_the_broadcast(redis_pair, make_org):
    """Issue 59: each daphne keeps the key's principal; only the Redis broadcast tells it of the revocation."""
    from django.utils import timezone

    org = make_org("ck")
    headers = {"Authorization": f"Bearer {org.key}"}
    streams = [_opened(open_stream(server.url, org.key)) for server in redis_pair]
    row = ApiKey.objects.get(org=org.org, name="")
    ApiKey.objects.filter(pk=row.pk).update(revoked_at=timezone.now())  # behind the caches' back: no signal, no broadcast
    for server in redis_pair:  # so a 200 here is each daphne's cached principal answering
        assert httpx.get(server.url + "/v1/agents", headers=headers, timeout=30).status_code == 200
    revocation.revoke([revocation.key_revoked(row.pk)])  # made in this process: only Redis reaches the daphnes
    for stream in streams:
        _ends_revoked(stream)  # the broadcast has arrived in that daphne
    for server in redis_pair:
        refused = httpx.get(server.url + "/v1/agents", headers=headers, timeout=30)
        assert refused.status_code == 403 and refused.json()["error"] == "the API key is unknown or revoked"
