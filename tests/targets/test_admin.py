"""The admin shows the acting org's machines, routed runs and claim keys (hash prefix only)."""

from django.test import Client

from tests.targets.conftest import offer, post


def test_org_admin_sees_the_orgs_machines_and_claim_keys_by_hash_prefix_only(org_a, org_b, machine):
    target_id, key = machine
    post(org_b.client, "", {"label": "machine-of-b"})
    offer(org_a, target_id, run_id="run_admin")
    client = Client()
    client.force_login(org_a.user)
    targets = client.get("/admin/targets/target/")
    assert targets.status_code == 200
    assert target_id.encode() in targets.content and b"machine-of-b" not in targets.content
    keys = client.get("/admin/targets/claimkey/")
    assert keys.status_code == 200
    from targets.keys import hash_claim_key

    digest = hash_claim_key(key)
    assert digest[:12].encode() in keys.content
    assert key.encode() not in keys.content and digest.encode() not in keys.content
    detail = client.get(f"/admin/targets/claimkey/{target_id}/change/")
    assert detail.status_code == 200 and digest.encode() not in detail.content
    assert b"run_admin" in client.get("/admin/targets/routedrun/").content


def test_the_admin_cannot_edit_machines_or_keys(org_a, machine):
    target_id, _ = machine
    client = Client()
    client.force_login(org_a.user)
    assert client.get("/admin/targets/target/add/").status_code == 403
    assert client.get("/admin/targets/claimkey/add/").status_code == 403
    client.post(f"/admin/targets/target/{target_id}/change/", {"label": "edited"})
    assert org_a.client.get(f"/v1/agents/targets/{target_id}").json()["label"] == "box"
