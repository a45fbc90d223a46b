"""Claim, report, the mailbox and the dispatch gate (spec 003 …/claim, …/report; reference §2.4)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_site.errors import NotFound
from targets import mailbox, selectors
from targets.errors import TargetUnavailable
from targets.models import ClaimKey, RoutedRun, Target
from tests.targets.conftest import offer, owned_by, patch, post

pytestmark = pytest.mark.both_stores

REJECTED = {"status": 403, "code": "claim_rejected", "error": "target claim rejected"}


@pytest.fixture(autouse=True)
def short_wait(settings):
    settings.AGENTS_CLAIM_WAIT_SECONDS = 0.2


def claim(client, target_id, key):
    headers = {} if key is None else {"X-Target-Key": key}
    return post(client, f"/{target_id}/claim", **headers)


def report(client, target_id, run_id, key, body):
    return post(client, f"/{target_id}/runs/{run_id}/report", body, **{"X-Target-Key": key})


def _offer_row(handle, run_id):
    with handle.context():
        return RoutedRun.objects.get(pk=run_id)


def _serving_at(handle, target_id):
    with handle.context():
        return ClaimKey.objects.get(target_id=target_id).serving_at


# --- the two proofs -----------------------------------------------------------------------


@pytest.mark.parametrize("case", ["no key", "empty key", "wrong key", "129-char key", "unknown target"])
def test_a_claim_failing_a_proof_is_the_same_403_and_takes_nothing(org_a, machine, case):
    target_id, key = machine
    offer(org_a, target_id)
    chosen_key = {"no key": None, "empty key": "", "wrong key": "tgtk_" + "0" * 64, "129-char key": key + "x" * (129 - len(key)),
                  "unknown target": key}[case]
    chosen_id = "tgt_" + "f" * 32 if case == "unknown target" else target_id
    r = claim(org_a.client, chosen_id, chosen_key)
    assert r.status_code == 403 and r.json() == REJECTED
    assert _offer_row(org_a, "run_1").state == "offered"
    assert _serving_at(org_a, target_id) is None


def test_the_right_key_for_another_machine_is_rejected(org_a, machine):
    target_id, _ = machine
    other = post(org_a.client, "", {"label": "other"}).json()["id"]
    other_key = post(org_a.client, f"/{other}/key").json()["claimKey"]
    offer(org_a, target_id)
    r = claim(org_a.client, target_id, other_key)
    assert r.status_code == 403 and r.json() == REJECTED
    assert _offer_row(org_a, "run_1").state == "offered"


def test_the_right_key_presented_by_a_non_owner_is_rejected(org_a, add_member):
    owner = add_member(org_a)
    stranger = add_member(org_a)
    target_id = owned_by(org_a, owner, {"label": "box"})["id"]
    key = post(owner.client, f"/{target_id}/key").json()["claimKey"]
    offer(org_a, target_id)
    r = claim(stranger.client, target_id, key)
    assert r.status_code == 403 and r.json() == REJECTED
    assert report(stranger.client, target_id, "run_1", key, {"status": "ok"}).json() == REJECTED
    assert _offer_row(org_a, "run_1").state == "offered"


def test_a_claim_from_another_orgs_member_is_rejected(org_a, org_b, machine):
    target_id, key = machine
    offer(org_a, target_id)
    r = claim(org_b.client, target_id, key)
    assert r.status_code == 403 and r.json() == REJECTED
    assert _offer_row(org_a, "run_1").state == "offered"


def test_a_claim_with_no_key_minted_is_rejected(org_a):
    target_id = post(org_a.client, "", {"label": "keyless"}).json()["id"]
    r = claim(org_a.client, target_id, "tgtk_" + "1" * 64)
    assert r.status_code == 403 and r.json() == REJECTED


def test_a_rotated_key_is_superseded_at_once(org_a, machine):
    target_id, old_key = machine
    new_key = post(org_a.client, f"/{target_id}/key").json()["claimKey"]
    offer(org_a, target_id)
    assert claim(org_a.client, target_id, old_key).json() == REJECTED
    assert _offer_row(org_a, "run_1").state == "offered"
    assert claim(org_a.client, target_id, new_key).status_code == 200


# --- waiting and winning ------------------------------------------------------------------


def test_right_key_and_no_work_answers_204_after_the_wait_and_stamps_liveness(org_a, machine):
    target_id, key = machine
    r = claim(org_a.client, target_id, key)
    assert r.status_code == 204 and r.content == b""
    stamped = _serving_at(org_a, target_id)
    assert stamped is not None and abs((timezone.now() - stamped).total_seconds()) < 30


def test_an_org_admin_who_does_not_own_the_machine_may_claim_with_its_key(org_a, add_member):
    owner = add_member(org_a)
    target_id = owned_by(org_a, owner, {"label": "box"})["id"]
    key = post(owner.client, f"/{target_id}/key").json()["claimKey"]
    offer(org_a, target_id)
    r = claim(org_a.client, target_id, key)  # org_a's client is an org admin
    assert r.status_code == 200 and r.json()["runId"] == "run_1"


def test_offer_claim_report_round_trip(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id, run_id="run_42", session_id="sess_42", payload={"input": "do it", "agent": {"name": "a"}})
    r = claim(org_a.client, target_id, key)
    assert r.status_code == 200
    assert r.json() == {"runId": "run_42", "sessionId": "sess_42", "input": "do it", "agent": {"name": "a"}}
    row = _offer_row(org_a, "run_42")
    assert row.state == "claimed" and row.claimed_at is not None
    assert claim(org_a.client, target_id, key).status_code == 204  # won once, never twice

    done = report(org_a.client, target_id, "run_42", key, {"status": "ok", "output": "done!", "model": "m", "promptTokens": 3})
    assert done.status_code == 200 and done.json() == {"delivered": True}
    row = _offer_row(org_a, "run_42")
    assert row.state == "reported" and row.result["output"] == "done!" and row.result["status"] == "ok"
    assert row.result["promptTokens"] == 3

    again = report(org_a.client, target_id, "run_42", key, {"status": "error", "error": "late"})
    assert again.json() == {"delivered": False}
    assert _offer_row(org_a, "run_42").result["output"] == "done!"
    assert report(org_a.client, target_id, "run_unknown", key, {"status": "ok"}).json() == {"delivered": False}


def test_a_report_is_clamped_never_refused(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id)
    claim(org_a.client, target_id, key)
    body = {"status": "error", "branch": "b" * 600, "commitSha": "c" * 200, "diffstat": "d" * 70000, "promptTokens": -4}
    r = report(org_a.client, target_id, "run_1", key, body)
    assert r.status_code == 200 and r.json() == {"delivered": True}
    result = _offer_row(org_a, "run_1").result
    assert len(result["branch"]) == 512 and len(result["commitSha"]) == 128 and len(result["diffstat"]) == 65536
    assert result["promptTokens"] == 0 and result["status"] == "error" and result["error"]


def test_a_report_with_a_failed_proof_is_403_and_settles_nothing(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id)
    claim(org_a.client, target_id, key)
    for bad in ("", "tgtk_" + "9" * 64, key + "x" * 100):
        r = report(org_a.client, target_id, "run_1", bad, {"status": "ok"})
        assert r.status_code == 403 and r.json() == REJECTED
    assert _offer_row(org_a, "run_1").state == "claimed"


def test_only_the_claiming_machine_can_report_a_run(org_a, machine):
    target_id, key = machine
    other = post(org_a.client, "", {"label": "other"}).json()["id"]
    other_key = post(org_a.client, f"/{other}/key").json()["claimKey"]
    offer(org_a, target_id)
    claim(org_a.client, target_id, key)
    assert report(org_a.client, other, "run_1", other_key, {"status": "ok"}).json() == {"delivered": False}
    assert _offer_row(org_a, "run_1").state == "claimed"


def test_an_unclaimed_run_cannot_be_reported(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id)
    assert report(org_a.client, target_id, "run_1", key, {"status": "ok"}).json() == {"delivered": False}
    assert _offer_row(org_a, "run_1").state == "offered"


def test_a_run_offered_to_one_machine_is_unreachable_from_anothers_claim(org_a, org_b, machine):
    target_id, key = machine
    other = post(org_a.client, "", {"label": "other"}).json()["id"]
    other_key = post(org_a.client, f"/{other}/key").json()["claimKey"]
    b_target = post(org_b.client, "", {"label": "b"}).json()["id"]
    b_key = post(org_b.client, f"/{b_target}/key").json()["claimKey"]
    offer(org_a, target_id)
    assert claim(org_a.client, other, other_key).status_code == 204
    assert claim(org_b.client, b_target, b_key).status_code == 204
    assert _offer_row(org_a, "run_1").state == "offered"
    assert claim(org_a.client, target_id, key).json()["runId"] == "run_1"


def test_offers_are_claimed_oldest_first(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id, run_id="run_a", session_id="s_a")
    offer(org_a, target_id, run_id="run_b", session_id="s_b")
    assert claim(org_a.client, target_id, key).json()["runId"] == "run_a"
    assert claim(org_a.client, target_id, key).json()["runId"] == "run_b"


def test_a_newer_offer_for_the_same_session_supersedes_the_unclaimed_one(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id, run_id="run_old", session_id="sess_x")
    offer(org_a, target_id, run_id="run_new", session_id="sess_x")
    assert _offer_row(org_a, "run_old").state == "withdrawn"
    assert claim(org_a.client, target_id, key).json()["runId"] == "run_new"
    assert claim(org_a.client, target_id, key).status_code == 204


def test_an_offer_whose_run_was_stopped_is_withdrawn(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id)
    with org_a.context():
        withdrawn = mailbox.routed_withdraw(run_id="run_1")
        assert withdrawn is not None and withdrawn.state == "withdrawn"
        assert mailbox.routed_withdraw(run_id="run_1") is None  # idempotent
    assert claim(org_a.client, target_id, key).status_code == 204
    assert report(org_a.client, target_id, "run_1", key, {"status": "ok"}).json() == {"delivered": False}


def test_a_claimed_run_that_is_stopped_can_no_longer_be_reported(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id)
    claim(org_a.client, target_id, key)
    with org_a.context():
        mailbox.routed_withdraw(run_id="run_1")
    assert report(org_a.client, target_id, "run_1", key, {"status": "ok"}).json() == {"delivered": False}
    assert _offer_row(org_a, "run_1").state == "withdrawn"


def test_a_released_offer_can_be_claimed_again(org_a, machine):
    target_id, key = machine
    offer(org_a, target_id)
    assert claim(org_a.client, target_id, key).status_code == 200
    with org_a.context():
        assert mailbox.routed_release(run_id="run_1") is True
    assert _offer_row(org_a, "run_1").state == "offered"
    assert claim(org_a.client, target_id, key).json()["runId"] == "run_1"


def test_deleting_a_machine_withdraws_its_open_offers(org_a, machine):
    target_id, _ = machine
    offer(org_a, target_id)
    assert org_a.client.delete(f"/v1/agents/targets/{target_id}").status_code == 200
    assert _offer_row(org_a, "run_1").state == "withdrawn"


def test_an_offer_carries_no_credential(org_a, machine):
    target_id, _ = machine
    with pytest.raises(ValueError):
        offer(org_a, target_id, payload={"agent": {"name": "a", "apiKey": "sk-live"}})
    with org_a.context():
        assert not RoutedRun.objects.exists()


def test_an_offer_to_an_unknown_or_foreign_machine_is_not_found(org_a, org_b, machine):
    target_id, _ = machine
    with pytest.raises(NotFound):
        offer(org_b, target_id)
    with org_b.context():
        assert not RoutedRun.objects.exists()


# --- the dispatch gate --------------------------------------------------------------------


def _gate(handle, target_id):
    with handle.context():
        return selectors.target_dispatchable(target_id=target_id)


def test_the_gate_admits_a_keyed_machine_that_claimed_recently(org_a, machine):
    target_id, key = machine
    with pytest.raises(TargetUnavailable, match="has not claimed work within 90 s"):
        _gate(org_a, target_id)
    claim(org_a.client, target_id, key)
    assert _gate(org_a, target_id).id == target_id


def test_the_gate_refuses_a_keyless_machine(org_a):
    target_id = post(org_a.client, "", {"label": "keyless"}).json()["id"]
    with pytest.raises(TargetUnavailable, match="no claim key") as err:
        _gate(org_a, target_id)
    assert err.value.status == 409 and err.value.body()["code"] == "target_unavailable"


def test_the_gate_refuses_a_machine_whose_last_claim_is_older_than_90_seconds(org_a, machine):
    target_id, key = machine
    claim(org_a.client, target_id, key)
    with org_a.context():
        ClaimKey.objects.filter(target_id=target_id).update(serving_at=timezone.now() - timedelta(seconds=91))
    with pytest.raises(TargetUnavailable, match="has not claimed work"):
        _gate(org_a, target_id)


@pytest.mark.parametrize("status, reason", [("offline", "target is offline"), ("draining", "target is draining")])
def test_the_gate_refuses_offline_and_draining_machines(org_a, machine, status, reason):
    target_id, key = machine
    claim(org_a.client, target_id, key)
    patch(org_a.client, f"/{target_id}", {"status": status})
    with pytest.raises(TargetUnavailable, match=reason):
        _gate(org_a, target_id)


def test_the_gate_refuses_a_machine_without_a_heartbeat_for_90_seconds(org_a, machine):
    target_id, key = machine
    claim(org_a.client, target_id, key)
    with org_a.context():
        Target.objects.filter(pk=target_id).update(metrics={"load1": 1.0}, metrics_at=timezone.now() - timedelta(seconds=91))
    with pytest.raises(TargetUnavailable, match="no heartbeat"):
        _gate(org_a, target_id)


def test_the_gate_does_not_find_unknown_or_foreign_machines(org_a, org_b, machine):
    target_id, key = machine
    claim(org_a.client, target_id, key)
    with pytest.raises(NotFound):
        _gate(org_b, target_id)
    with pytest.raises(NotFound):
        _gate(org_a, "tgt_" + "a" * 32)
