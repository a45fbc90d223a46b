"""Targets CRUD, re-linking, ownership, sanitizing and effective status (spec 003 /targets)."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from targets.models import ClaimKey, Target
from tests.support.stored import stored_bytes
from tests.targets.conftest import owned_by, patch, post

pytestmark = pytest.mark.both_stores

NOT_FOUND = {"status": 404, "code": "not_found", "error": "target not found"}


def _rows(handle):
    with handle.context():
        return list(Target.objects.all())


def _row(handle, target_id):
    with handle.context():
        return Target.objects.get(pk=target_id)


# --- register / re-link -------------------------------------------------------------------


def test_first_registration_answers_201_with_defaults_and_binds_the_caller(org_a):
    r = post(org_a.client, "", {"label": "  my box  ", "host": "box.local", "capacity": "4 jobs"})
    assert r.status_code == 201
    body = r.json()
    assert re.fullmatch(r"tgt_[0-9a-f]{32}", body["id"])
    assert body["label"] == "my box" and body["kind"] == "machine" and body["status"] == "online"
    assert body["host"] == "box.local" and body["capacity"] == "4 jobs"
    assert body["sessions"] == 0 and body["running"] == 0
    assert "spec" not in body and "metrics" not in body and "metricsAt" not in body
    row = _row(org_a, body["id"])
    assert row.owner == org_a.user.username and row.label == "my box"


def test_reregistering_the_same_host_relinks_the_same_row_with_200(org_a):
    first = post(org_a.client, "", {"label": "old", "host": "box.local", "kind": "laptop"}).json()
    again = post(org_a.client, "", {"label": "new", "host": "box.local", "kind": "gpu"})
    assert again.status_code == 200
    body = again.json()
    assert body["id"] == first["id"] and body["createdAt"] == first["createdAt"]
    assert body["label"] == "new" and body["kind"] == "gpu"
    rows = _rows(org_a)
    assert len(rows) == 1 and rows[0].label == "new"


def test_another_members_machine_on_the_same_host_is_never_adopted(org_a, add_member):
    mine = post(org_a.client, "", {"label": "mine", "host": "shared.local"}).json()
    other = add_member(org_a, admin=True)  # only admins register machines (issue 50)
    theirs = post(other.client, "", {"label": "theirs", "host": "shared.local"})
    assert theirs.status_code == 201
    assert theirs.json()["id"] != mine["id"]
    assert _row(org_a, mine["id"]).owner == org_a.user.username
    assert _row(org_a, mine["id"]).label == "mine"
    assert _row(org_a, theirs.json()["id"]).owner == other.username


def test_an_unowned_row_is_adopted_by_the_admin_who_reregisters_its_host(org_a, add_member):
    seed = post(org_a.client, "", {"label": "legacy", "host": "old.local"}).json()
    with org_a.context():
        Target.objects.filter(pk=seed["id"]).update(owner="")
    member = add_member(org_a, admin=True)  # only admins register machines (issue 50)
    r = post(member.client, "", {"label": "adopted", "host": "old.local"})
    assert r.status_code == 200 and r.json()["id"] == seed["id"]
    assert _row(org_a, seed["id"]).owner == member.username


def test_registrations_without_a_host_never_relink(org_a):
    a = post(org_a.client, "", {"label": "one"})
    b = post(org_a.client, "", {"label": "one"})
    assert a.status_code == 201 and b.status_code == 201 and a.json()["id"] != b.json()["id"]
    assert len(_rows(org_a)) == 2


@pytest.mark.parametrize(
    "body, message",
    [
        ({"label": "   "}, "label is required"),
        ({}, "label is required"),
        ({"label": "x" * 129}, "label too long"),
        ({"label": "ok", "kind": "toaster"}, "kind must be laptop|cloud|gpu|cluster|machine"),
        ({"label": "ok", "status": "sleeping"}, "status must be online|offline|draining"),
        ({"label": "ok", "capacity": "c" * 257}, "capacity too long"),
        ({"label": "ok", "host": "h" * 257}, "host too long"),
        ({"label": "ok", "spec": {"gpus": [{"model": "A100"}] * 33}}, "too many gpus"),
    ],
)
def test_bad_registration_answers_400_and_writes_nothing(org_a, body, message):
    r = post(org_a.client, "", body)
    assert r.status_code == 400
    assert r.json() == {"status": 400, "code": "invalid_request", "error": message}
    assert _rows(org_a) == []


def test_a_128_character_label_and_32_gpus_are_accepted(org_a):
    r = post(org_a.client, "", {"label": "x" * 128, "spec": {"gpus": [{"model": "A100"}] * 32}})
    assert r.status_code == 201
    assert len(r.json()["spec"]["gpus"]) == 32


def test_spec_and_metrics_are_sanitized_before_they_are_stored(org_a):
    spec = {
        "os": "  " + "l" * 100,
        "arch": "x86_64",
        "cpus": 10**9,
        "memory": -5,
        "gpus": [{}, {"vendor": "nvidia", "model": "A100", "memory": float("inf")}],
        "extra": "dropped",
    }
    metrics = {"load1": float("nan"), "load5": -1, "load15": 2.5, "memUsed": 1024, "gpuUtil": 7, "at": "1999-01-01T00:00:00Z"}
    r = post(org_a.client, "", {"label": "box", "spec": spec, "metrics": metrics})
    assert r.status_code == 201
    body = r.json()
    assert body["spec"] == {"os": "l" * 64, "arch": "x86_64", "cpus": 8192, "gpus": [{"vendor": "nvidia", "model": "A100"}]}
    assert body["metrics"]["load15"] == 2.5 and body["metrics"]["memUsed"] == 1024 and body["metrics"]["gpuUtil"] == 1.0
    assert "load1" not in body["metrics"] and "load5" not in body["metrics"]
    assert body["metrics"]["at"] == body["metricsAt"] != "1999-01-01T00:00:00Z"
    row = _row(org_a, body["id"])
    assert row.spec == body["spec"]
    assert row.metrics == {"load15": 2.5, "memUsed": 1024, "gpuUtil": 1.0}
    assert abs((timezone.now() - row.metrics_at).total_seconds()) < 60


# --- list / get ---------------------------------------------------------------------------


def test_list_is_newest_first_with_session_load_and_only_the_callers_org(org_a, org_b, django_assert_max_num_queries):
    ids = [post(org_a.client, "", {"label": f"m{i}"}).json()["id"] for i in range(4)]
    post(org_b.client, "", {"label": "elsewhere"})
    with org_a.context() as alias:
        base = timezone.now()
        for i, target_id in enumerate(ids):
            Target.objects.filter(pk=target_id).update(created_at=base + timedelta(seconds=i))
        with django_assert_max_num_queries(2, connection=connections[alias]):
            r = org_a.client.get("/v1/agents/targets")
    assert r.status_code == 200
    listed = r.json()["targets"]
    assert [t["id"] for t in listed] == list(reversed(ids))
    assert all(t["sessions"] == 0 and t["running"] == 0 for t in listed)


def test_any_member_reads_a_machine_but_another_org_gets_404(org_a, org_b, add_member):
    target = post(org_a.client, "", {"label": "box"}).json()
    member = add_member(org_a)
    assert member.client.get(f"/v1/agents/targets/{target['id']}").json()["id"] == target["id"]
    r = org_b.client.get(f"/v1/agents/targets/{target['id']}")
    assert r.status_code == 404 and r.json() == NOT_FOUND
    assert org_b.client.get("/v1/agents/targets/" + "t" * 129).status_code == 404


def test_anonymous_callers_are_refused(client):
    r = client.get("/v1/agents/targets")
    assert r.status_code == 403 and r.json()["code"] == "forbidden"


# --- effective status ---------------------------------------------------------------------


def test_effective_status_is_offline_once_90_seconds_pass_without_a_heartbeat(org_a):
    target = post(org_a.client, "", {"label": "box", "metrics": {"load1": 1.0}}).json()
    assert target["status"] == "online"
    with org_a.context():
        Target.objects.filter(pk=target["id"]).update(metrics_at=timezone.now() - timedelta(seconds=91))
    stale = org_a.client.get(f"/v1/agents/targets/{target['id']}").json()
    assert stale["status"] == "offline"
    assert _row(org_a, target["id"]).status == "online"  # the stored intent is untouched
    beat = patch(org_a.client, f"/{target['id']}", {"metrics": {"load1": 0.5}})
    assert beat.status_code == 200 and beat.json()["status"] == "online"


def test_a_machine_that_never_heartbeated_keeps_its_stored_status(org_a):
    target = post(org_a.client, "", {"label": "box", "status": "draining"}).json()
    assert target["status"] == "draining"
    fresh = post(org_a.client, "", {"label": "quiet"}).json()
    with org_a.context():
        Target.objects.filter(pk=fresh["id"]).update(created_at=timezone.now() - timedelta(days=3))
    assert org_a.client.get(f"/v1/agents/targets/{fresh['id']}").json()["status"] == "online"


# --- patch --------------------------------------------------------------------------------


def test_owner_patches_in_place_and_omitted_fields_keep_their_value(org_a, add_member):
    owner = add_member(org_a)
    target = owned_by(org_a, owner, {"label": "box", "kind": "laptop", "capacity": "2"})
    r = patch(owner.client, f"/{target['id']}", {"label": "renamed", "capacity": ""})
    assert r.status_code == 200
    body = r.json()
    assert body["label"] == "renamed" and body["kind"] == "laptop" and "capacity" not in body
    row = _row(org_a, target["id"])
    assert row.label == "renamed" and row.capacity == "" and row.kind == "laptop"


def test_a_metrics_patch_is_a_heartbeat_stamped_by_the_server_clock(org_a):
    target = post(org_a.client, "", {"label": "box"}).json()
    long_ago = "2000-01-01T00:00:00Z"
    r = patch(org_a.client, f"/{target['id']}", {"metrics": {"load1": 0.25, "at": long_ago}})
    assert r.status_code == 200
    assert r.json()["metricsAt"] != long_ago
    row = _row(org_a, target["id"])
    assert abs((timezone.now() - row.metrics_at).total_seconds()) < 60
    cleared = patch(org_a.client, f"/{target['id']}", {"metrics": {"load1": 0}})
    assert cleared.status_code == 200 and "metricsAt" not in cleared.json() and "metrics" not in cleared.json()
    assert _row(org_a, target["id"]).metrics_at is None


def test_non_owners_get_the_same_404_as_an_unknown_id_and_nothing_changes(org_a, add_member):
    owner = add_member(org_a)
    stranger = add_member(org_a)
    target = owned_by(org_a, owner, {"label": "box"})
    r = patch(stranger.client, f"/{target['id']}", {"label": "stolen"})
    unknown = patch(stranger.client, "/tgt_" + "0" * 32, {"label": "stolen"})
    assert r.status_code == 404 and r.json() == NOT_FOUND == unknown.json()
    assert stranger.client.delete(f"/v1/agents/targets/{target['id']}").json() == NOT_FOUND
    assert post(stranger.client, f"/{target['id']}/key").json() == NOT_FOUND
    row = _row(org_a, target["id"])
    assert row.label == "box"
    with org_a.context():
        assert not ClaimKey.objects.filter(target_id=target["id"]).exists()


def test_an_org_admin_may_edit_delete_and_key_any_machine(org_a, add_member):
    owner = add_member(org_a)
    target = owned_by(org_a, owner, {"label": "box"})
    assert patch(org_a.client, f"/{target['id']}", {"status": "draining"}).json()["status"] == "draining"
    assert post(org_a.client, f"/{target['id']}/key").status_code == 200
    r = org_a.client.delete(f"/v1/agents/targets/{target['id']}")
    assert r.status_code == 200 and r.json() == {"deleted": True, "id": target["id"]}
    assert _rows(org_a) == []


@pytest.mark.parametrize(
    "body, message",
    [
        ({"label": ""}, "label cannot be empty"),
        ({"label": "y" * 129}, "label too long"),
        ({"kind": "toaster"}, "kind must be laptop|cloud|gpu|cluster|machine"),
        ({"status": "asleep"}, "status must be online|offline|draining"),
        ({"spec": {"gpus": [{"model": "x"}] * 33}}, "too many gpus"),
    ],
)
def test_bad_patch_answers_400_and_changes_nothing(org_a, body, message):
    target = post(org_a.client, "", {"label": "box", "kind": "gpu"}).json()
    before = _row(org_a, target["id"])
    r = patch(org_a.client, f"/{target['id']}", body)
    assert r.status_code == 400 and r.json()["error"] == message
    after = _row(org_a, target["id"])
    assert (after.label, after.kind, after.status, after.spec, after.updated_at) == (
        before.label, before.kind, before.status, before.spec, before.updated_at
    )


def test_patching_a_host_onto_another_of_my_machines_conflicts(org_a):
    post(org_a.client, "", {"label": "a", "host": "a.local"})
    b = post(org_a.client, "", {"label": "b", "host": "b.local"}).json()
    r = patch(org_a.client, f"/{b['id']}", {"host": "a.local"})
    assert r.status_code == 409 and r.json()["code"] == "conflict"
    assert _row(org_a, b["id"]).host == "b.local"


# --- delete -------------------------------------------------------------------------------


def test_owner_deletes_a_machine_with_its_claim_key(org_a, add_member):
    owner = add_member(org_a)
    target = owned_by(org_a, owner, {"label": "box"})
    assert post(owner.client, f"/{target['id']}/key").status_code == 200
    r = owner.client.delete(f"/v1/agents/targets/{target['id']}")
    assert r.status_code == 200 and r.json() == {"deleted": True, "id": target["id"]}
    assert owner.client.get(f"/v1/agents/targets/{target['id']}").status_code == 404
    assert owner.client.delete(f"/v1/agents/targets/{target['id']}").status_code == 404
    with org_a.context():
        assert not ClaimKey.objects.exists() and not Target.objects.exists()


# --- claim keys ---------------------------------------------------------------------------


def test_a_claim_key_is_shown_once_and_stored_only_as_its_sha256(org_a, add_member):
    owner = add_member(org_a)
    target = owned_by(org_a, owner, {"label": "box"})
    r = post(owner.client, f"/{target['id']}/key")
    assert r.status_code == 200
    body = r.json()
    assert body["targetId"] == target["id"]
    assert re.fullmatch(r"tgtk_[0-9a-f]{64}", body["claimKey"])
    with org_a.context() as alias:
        stored = ClaimKey.objects.get(target_id=target["id"])
        raw = stored_bytes(connections[alias])  # the SQLite file and WAL, or every PostgreSQL row
    assert stored.key_hash == hashlib.sha256(body["claimKey"].encode()).hexdigest()
    assert stored.serving_at is None
    assert body["claimKey"].encode() not in raw and stored.key_hash.encode() in raw


def test_rotating_the_key_replaces_the_hash_and_resets_serving(org_a):
    target = post(org_a.client, "", {"label": "box"}).json()
    first = post(org_a.client, f"/{target['id']}/key").json()["claimKey"]
    with org_a.context():
        ClaimKey.objects.filter(target_id=target["id"]).update(serving_at=timezone.now())
    second = post(org_a.client, f"/{target['id']}/key").json()["claimKey"]
    assert first != second
    with org_a.context():
        stored = ClaimKey.objects.get(target_id=target["id"])
    assert stored.key_hash == hashlib.sha256(second.encode()).hexdigest() and stored.serving_at is None


# --- session load -------------------------------------------------------------------------


def test_each_machine_carries_its_live_session_load(org_a, django_assert_max_num_queries):
    from sessions.services import session_create

    box = post(org_a.client, "", {"label": "box", "host": "box.local"}).json()
    bare = post(org_a.client, "", {"label": "bare"}).json()
    with org_a.context() as alias:
        session_create(agent="a", actor="x", target=box["id"])
        session_create(agent="a", actor="x", host="box.local", status="done")
        session_create(agent="a", actor="x", target=box["id"], host="box.local")  # counted once
        session_create(agent="a", actor="x", host="elsewhere.local")
        session_create(agent="a", actor="x", target=bare["id"], status="error")
        with django_assert_max_num_queries(2, connection=connections[alias]):
            listed = org_a.client.get("/v1/agents/targets").json()["targets"]
    load = {t["id"]: (t["sessions"], t["running"]) for t in listed}
    assert load == {box["id"]: (3, 2), bare["id"]: (1, 0)}
    one = org_a.client.get(f"/v1/agents/targets/{box['id']}").json()
    assert (one["sessions"], one["running"]) == (3, 2)


@pytest.mark.parametrize("ok", ["yes", 1, "true"])
def test_a_report_ok_must_be_a_json_boolean(org_a, ok):
    target = post(org_a.client, "", {"label": "m"}).json()
    response = post(org_a.client, f"/{target['id']}/runs/run_{'0' * 32}/report", {"ok": ok})
    assert response.status_code == 400
    assert response.json()["fields"][0]["field"].endswith("ok")


def test_spec_sandbox_is_listed_and_an_unknown_word_dropped(org_a):
    r = post(org_a.client, "", {"label": "runner", "spec": {"os": "linux", "sandbox": "bubblewrap"}})
    assert r.status_code == 201 and r.json()["spec"] == {"os": "linux", "sandbox": "bubblewrap"}
    listed = {t["label"]: t for t in org_a.client.get("/v1/agents/targets").json()["targets"]}
    assert listed["runner"]["spec"]["sandbox"] == "bubblewrap"
    r = post(org_a.client, "", {"label": "odd", "spec": {"os": "linux", "sandbox": "chroot"}})
    assert r.status_code == 201 and r.json()["spec"] == {"os": "linux"}
    with org_a.context():
        assert Target.objects.get(label="odd").spec == {"os": "linux"}
