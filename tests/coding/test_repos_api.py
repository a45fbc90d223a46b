"""POST/GET /v1/agents/repos, GET/PATCH/DELETE /v1/agents/repos/{owner}/{name} (issue 14 item 1)."""

from __future__ import annotations

import json

import pytest

from coding.models import Repo
from tests.coding.conftest import register

pytestmark = pytest.mark.both_stores


def _stored(org) -> list[Repo]:
    with org.context():
        return list(Repo.objects.all())


def test_admin_registers_a_repo(org_a, remote):
    response = register(org_a, remote, defaultBranch="main")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["repo"] == "acme/shop" and body["cloneUrl"] == f"file://{remote}" and body["defaultBranch"] == "main"
    assert body["credential"] == ""
    listed = org_a.client.get("/v1/agents/repos").json()["repos"]
    assert [r["repo"] for r in listed] == ["acme/shop"]
    assert org_a.client.get("/v1/agents/repos/acme/shop").json()["id"] == body["id"]


def test_duplicate_repo_is_409(org_a, remote):
    assert register(org_a, remote).status_code == 201
    response = register(org_a, remote)
    assert response.status_code == 409 and response.json()["code"] == "repo_exists"
    assert len(_stored(org_a)) == 1


def test_another_orgs_repo_is_404(org_a, org_b, remote):
    assert register(org_a, remote).status_code == 201
    for response in (
        org_b.client.get("/v1/agents/repos/acme/shop"),
        org_b.client.patch("/v1/agents/repos/acme/shop", {"defaultBranch": "dev"}, content_type="application/json"),
        org_b.client.delete("/v1/agents/repos/acme/shop"),
    ):
        assert response.status_code == 404 and response.json() == {"status": 404, "code": "not_found", "error": "repo not found"}
    assert org_b.client.get("/v1/agents/repos").json() == {"repos": []}


def test_member_reads_but_cannot_manage(make_org, remote):
    member = make_org("m", admin=False)
    response = register(member, remote)
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert _stored(member) == []
    assert member.client.get("/v1/agents/repos").status_code == 200


def test_file_url_outside_the_allowed_roots_is_400(org_a, tmp_path):
    outside = tmp_path / "elsewhere.git"
    outside.mkdir()
    response = org_a.client.post("/v1/agents/repos", {"repo": "acme/x", "cloneUrl": f"file://{outside}"}, content_type="application/json")
    assert response.status_code == 400
    assert "AGENTS_REPO_FILE_ROOTS" in response.json()["error"]
    assert _stored(org_a) == []


def test_file_url_escaping_the_root_through_dotdot_is_400(org_a, remote, tmp_path):
    sneaky = f"file://{tmp_path}/remotes/../seed"
    response = org_a.client.post("/v1/agents/repos", {"repo": "acme/x", "cloneUrl": sneaky}, content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize("url", [
    "https://127.0.0.1/acme/shop.git",
    "https://localhost/acme/shop.git",
    "https://10.1.2.3/x.git",
    "https://[::1]/x.git",
    "https://169.254.169.254/latest",
    "ssh://git@192.168.1.5/x.git",
    "git@127.0.0.1:acme/shop.git",
    "http://github.com/acme/shop.git",
    "ext::sh -c touch% /tmp/pwned",
    "-uhttps://github.com/x",
    "https://user:pass@github.com/acme/shop.git",
    "git://github.com/acme/shop.git",
    # issue 50: the written forms the outbound rule reads as inward addresses
    "https://2130706433/acme/shop.git",
    "https://0xa9fea9fe/latest",
    "https://localhost./acme/shop.git",
    "https://0177.0.0.1/acme/shop.git",
    "https://[2002:7f00:1::1]/acme/shop.git",
    "https://[64:ff9b::a9fe:a9fe]/latest",
    "git@2130706433:acme/shop.git",
])
def test_refused_clone_urls(org_a, url):
    response = org_a.client.post("/v1/agents/repos", {"repo": "acme/x", "cloneUrl": url}, content_type="application/json")
    if "user:pass@" in url:  # a password in the URL is a credential: the scan of every caller text refuses it first
        assert response.status_code == 422 and response.json()["code"] == "secret_in_transcript", response.content
    else:
        assert response.status_code == 400, url
        assert response.json()["code"] == "invalid_request"
    assert _stored(org_a) == []


def test_a_clone_url_whose_name_resolves_inward_is_refused_at_create(org_a, monkeypatch):
    from toolkit import outbound

    monkeypatch.setattr(outbound, "system_resolver", lambda host, port: ["2002:a9fe:a9fe::1"])
    response = org_a.client.post("/v1/agents/repos", {"repo": "acme/x", "cloneUrl": "https://inward.example/acme/x.git"},
                                 content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("cloneUrl: inward.example resolves to 2002:a9fe:a9fe::1, a cloud metadata (6to4) address")
    assert _stored(org_a) == []


def test_allowed_host_lets_a_private_host_through(org_a, settings):
    settings.AGENTS_REPO_ALLOW_HOSTS = ["10.1.2.3"]
    response = org_a.client.post("/v1/agents/repos", {"repo": "acme/x", "cloneUrl": "https://10.1.2.3/acme/x.git"}, content_type="application/json")
    assert response.status_code == 201, response.content


def test_public_https_and_ssh_urls_are_accepted(org_a):
    for repo, url in (("acme/a", "https://github.com/acme/a.git"), ("acme/b", "git@140.82.112.3:acme/b.git"), ("acme/c", "ssh://git@140.82.112.3:22/acme/c.git")):
        response = org_a.client.post("/v1/agents/repos", {"repo": repo, "cloneUrl": url}, content_type="application/json")
        assert response.status_code == 201, response.content


def test_credential_must_be_granted_to_the_org(org_a, org_b, remote, settings, monkeypatch):
    monkeypatch.setenv("SHOP_PUSH_TOKEN", "ghp_notreallyusedhere")
    settings.AGENTS_REPO_CREDENTIALS = json.dumps({"shop-bot": {"ref": "env:SHOP_PUSH_TOKEN", "grantedTo": [org_a.slug]}})
    ok = register(org_a, remote, credential="shop-bot")
    assert ok.status_code == 201 and ok.json()["credential"] == "shop-bot"
    assert "ghp_" not in ok.content.decode()
    refused = register(org_b, remote, credential="shop-bot")
    assert refused.status_code == 400 and "not granted" in refused.json()["error"]
    env_name = register(org_b, remote, credential="env:SHOP_PUSH_TOKEN")
    assert env_name.status_code == 400
    assert _stored(org_b) == []


def test_patch_and_delete(org_a, remote):
    assert register(org_a, remote).status_code == 201
    response = org_a.client.patch("/v1/agents/repos/acme/shop", {"defaultBranch": "develop"}, content_type="application/json")
    assert response.status_code == 200 and response.json()["defaultBranch"] == "develop"
    bad = org_a.client.patch("/v1/agents/repos/acme/shop", {"defaultBranch": "-x"}, content_type="application/json")
    assert bad.status_code == 400
    gone = org_a.client.delete("/v1/agents/repos/acme/shop")
    assert gone.status_code == 200 and gone.json() == {"deleted": True, "repo": "acme/shop"}
    assert _stored(org_a) == []
