"""The revocation registry (tenancy.revocation) and the services that revoke: who is closed, once, with no race."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from django.contrib.auth import get_user_model

from agents_site.errors import NotFound
from agents_site.settings import redis_channel_layer
from agents_site.vocabulary import PrincipalVia
from tenancy import revocation
from tenancy.models import ApiKey, Membership, Org
from tenancy.principal import Principal
from tenancy.services import api_key_create, api_key_revoke, membership_remove, membership_set, org_delete
from tests.support.waiting import wait_until


@pytest.fixture(autouse=True)
def clean_registry():
    revocation.reset()
    yield
    revocation.reset()


def _principal(**kw) -> Principal:
    base = {"subject": "ann", "via": PrincipalVia.API_KEY, "org_slug": "acme", "user_id": 7, "api_key_id": 3}
    return Principal(**{**base, **kw})


def test_principal_keys_name_the_key_the_membership_and_the_org():
    assert revocation.principal_keys(_principal()) == {("org", "acme"), ("member", "acme", 7), ("key", 3)}
    jwt = _principal(via=PrincipalVia.JWT, user_id=None, api_key_id=None)
    assert revocation.principal_keys(jwt) == {("org", "acme")}
    assert revocation.principal_keys(_principal(org_slug=None, api_key_id=None)) == frozenset()


def test_a_revocation_fires_only_the_connections_it_names_and_each_once():
    fired = []
    mine = revocation.watch(revocation.principal_keys(_principal()), lambda: fired.append("mine"))
    revocation.watch(revocation.principal_keys(_principal(api_key_id=4, user_id=8)), lambda: fired.append("other key"))
    revocation.watch(revocation.principal_keys(_principal(org_slug="beta", api_key_id=5)), lambda: fired.append("other org"))
    assert revocation.revoke_local([revocation.key_revoked(3)]) == 1
    assert fired == ["mine"] and mine.fired
    assert revocation.revoke_local([revocation.key_revoked(3), revocation.member_removed("acme", 7)]) == 0  # fired once, gone
    assert revocation.revoke_local([revocation.org_deleted("acme")]) == 1
    assert fired == ["mine", "other key"]
    assert revocation.open_connections(revocation.org_deleted("beta")) == 1


def test_a_listener_whose_receive_fails_still_applies_a_broadcast_sent_while_it_waits(settings):
    # On a loaded host the listener's blocking Redis read can time out. It then left the group
    # and joined again on a new channel a second later: a revocation broadcast in between was
    # lost, and another process's streams of a revoked key stayed open. It now retries on the
    # same channel, still in the group. Here a 2 s socket timeout, under channels-redis's 5 s
    # blocking pop, fails every idle read.
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": redis_channel_layer("redis://127.0.0.1:6379/3", socket_timeout=2,
                                                              prefix=f"rv{uuid.uuid4().hex[:8]}")}
    revocation.reset()
    assert revocation.start(wait_seconds=10)
    listener = revocation._broadcaster()
    wait_until(lambda: listener.failures >= 1, timeout=20, what="the listener's read failing")  # it retries in 1 s
    fired = threading.Event()
    revocation.watch([revocation.key_revoked(41)], fired.set)

    async def broadcast_from_another_process() -> None:
        layer = channel_layers.make_backend("default")
        await layer.group_send(revocation.GROUP, {"type": revocation.MESSAGE_TYPE, "origin": "elsewhere", "keys": [["key", 41]]})
        await layer.close_pools()

    asyncio.run(broadcast_from_another_process())
    assert fired.wait(15), "the broadcast sent while the listener waited to retry was lost"


def test_a_cancelled_watch_is_never_fired():
    fired = []
    entry = revocation.watch([revocation.key_revoked(3)], lambda: fired.append(1))
    entry.cancel()
    assert revocation.revoke_local([revocation.key_revoked(3)]) == 0 and fired == []
    assert revocation.open_connections(revocation.key_revoked(3)) == 0


def test_a_revocation_between_the_credential_check_and_the_registration_still_closes():
    since = revocation.mark()  # taken before the credential was checked
    revocation.revoke_local([revocation.key_revoked(3)])  # lands while the check runs
    fired = []
    entry = revocation.watch([revocation.key_revoked(3)], lambda: fired.append(1), since=since)
    assert fired == [1] and entry.fired
    later = revocation.watch([revocation.key_revoked(3)], lambda: fired.append(2), since=revocation.mark())
    assert fired == [1] and not later.fired  # a check after the revocation saw it refused already


def test_a_failing_callback_does_not_stop_the_others():
    fired = []
    revocation.watch([revocation.key_revoked(3)], lambda: 1 / 0)
    revocation.watch([revocation.key_revoked(3)], lambda: fired.append(1))
    assert revocation.revoke_local([revocation.key_revoked(3)]) == 2 and fired == [1]


@pytest.mark.django_db(transaction=True)
def test_revoking_a_key_closes_its_connections_after_the_commit(org_a):
    row = ApiKey.objects.get(org=org_a.org)
    fired = []
    revocation.watch([revocation.key_revoked(row.pk)], lambda: fired.append("key"))
    revocation.watch([revocation.member_removed(org_a.slug, org_a.user.pk)], lambda: fired.append("member"))
    api_key_revoke(org=org_a.org, key_id=row.pk)
    assert fired == ["key"]
    assert ApiKey.objects.get(pk=row.pk).revoked_at is not None


@pytest.mark.django_db(transaction=True)
def test_removing_a_member_revokes_their_keys_there_and_closes_their_connections(make_org):
    org = make_org("rm", admin=False)
    other = make_org("rm2", username=org.user.username)  # the same user in a second org
    user = org.user
    fired = []
    revocation.watch([revocation.member_removed(org.slug, user.pk)], lambda: fired.append("member"))
    revocation.watch([revocation.member_removed(other.slug, user.pk)], lambda: fired.append("other org"))
    password = get_user_model().objects.get(pk=user.pk).password
    assert membership_remove(org=org.org, user_id=user.pk) == 1
    assert fired == ["member"]
    assert not Membership.objects.filter(org=org.org, user=user).exists()
    assert ApiKey.objects.get(org=org.org, user=user).revoked_at is not None
    assert ApiKey.objects.get(org=other.org, user=user).revoked_at is None  # the other org's key lives on
    fresh = get_user_model().objects.get(pk=user.pk)
    assert fresh.password == password and fresh.is_active  # the user is never edited
    with pytest.raises(NotFound):
        membership_remove(org=org.org, user_id=user.pk)
    with pytest.raises(NotFound):
        membership_remove(org=org.org, user_id=make_org("rm3").user.pk)  # another org's member


@pytest.mark.django_db(transaction=True)
def test_deleting_an_org_closes_every_connection_acting_for_it(make_org):
    org = make_org("del")
    keep = make_org("keep")
    fired = []
    revocation.watch([revocation.org_deleted(org.slug)], lambda: fired.append("org"))
    revocation.watch([revocation.org_deleted(keep.slug)], lambda: fired.append("kept"))
    org_delete(org=org.org)
    assert fired == ["org"]
    assert not Org.objects.filter(slug=org.slug).exists() and not ApiKey.objects.filter(org__slug=org.slug).exists()


@pytest.mark.django_db(transaction=True)
def test_a_removed_members_console_login_is_logged_out_on_its_next_request(make_org, client):
    org = make_org("cons", admin=False)
    membership_set(org=make_org("cons2").org, username=org.user.username)  # still a member elsewhere
    client.force_login(org.user)
    session = client.session
    session["agents_org"] = org.slug
    session.save()
    assert client.get("/console/").status_code == 200
    membership_remove(org=org.org, user_id=org.user.pk)
    response = client.get("/console/")
    assert response.status_code == 302 and "/login" in response["Location"]
    assert "_auth_user_id" not in client.session


def test_a_revocation_is_seen_through_the_shared_counter_before_any_broadcast_arrives(settings, monkeypatch):
    """Issue 59: a cached credential must be refused on the very next request after `revoke()` returns.

    The broadcast reaches other processes milliseconds later (or never, for a process whose channel
    prefix differs: the test process and the daphnes of make test's PostgreSQL pass). The counter in
    `REDIS_URL`'s database is bumped before the broadcast is sent; a position taken before it is stale
    after it, whatever the broadcast does.
    """
    import redis as redis_client

    url = "redis://127.0.0.1:6379/0"
    redis_client.Redis.from_url(url).ping()
    settings.REDIS_URL = url
    monkeypatch.setattr(revocation, "_shared_client", None)
    before = revocation._shared_stamp()
    assert isinstance(before, int)
    revocation._bump_shared_stamp()
    assert revocation._shared_stamp() != before  # so `revoked_since` answers True for every entry read before
    settings.REDIS_URL = ""
    monkeypatch.setattr(revocation, "_shared_client", None)
    assert revocation._shared_stamp() is None  # no Redis: nothing is trusted on that layer
