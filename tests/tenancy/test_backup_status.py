"""`backup_status` and the admin's per-org backup page (issue 35 item 2), on a replica made by a
one-shot Litestream sync (`litestream replicate -once`), with no daemon running."""

from __future__ import annotations

import io
import json
import subprocess

from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from agents.models import Agent
from tenancy import stores
from tenancy.backups import litestream
from tenancy.models import ReplicaGeneration


def _replicate_once(slug: str, url: str, tmp_path) -> None:
    config = tmp_path / f"{slug}.yml"
    config.write_text(litestream.render_config([(str(stores.store_path(slug)), url)]).replace(litestream.socket_path(), str(tmp_path / "once.sock")))
    done = subprocess.run([litestream.binary(), "replicate", "-once", "-config", str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_backup_status_and_the_admin_show_each_orgs_replica(org_a, org_b, settings, tmp_path):
    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    with org_a.context():
        Agent.objects.create(id="agent_x", name="x", created_at=timezone.now(), updated_at=timezone.now())
    url = litestream.join(litestream.base_url(), "orgs", org_a.slug, "g1")
    ReplicaGeneration.objects.create(slug=org_a.slug, name="g1", replica_url=url, started_at=timezone.now())
    ReplicaGeneration.objects.create(slug=org_b.slug, name="g1", replica_url=url.replace(org_a.slug, org_b.slug),
                                     started_at=timezone.now())
    _replicate_once(org_a.slug, url, tmp_path)

    out = io.StringIO()
    call_command("backup_status", "--json", stdout=out)
    rows = {row["org"]: row for row in map(json.loads, out.getvalue().splitlines())}
    assert rows[org_a.slug]["state"] == "not replicating" and rows[org_a.slug]["lastSnapshot"] is not None
    assert rows[org_a.slug]["replica"] == url and rows[org_a.slug]["lagSeconds"] is None
    assert rows[org_b.slug]["state"] == "unreachable" and "does not exist" in rows[org_b.slug]["detail"]

    client = Client()
    client.post("/admin/login/?next=/admin/", {"username": org_a.user.username, "password": "pw"})
    page = client.get("/admin/tenancy/replicageneration/")
    assert page.status_code == 200
    assert org_a.slug.encode() in page.content and org_b.slug.encode() not in page.content
    assert b"not replicating" in page.content and b"UTC" in page.content  # lag state and the last snapshot
    assert client.get("/admin/tenancy/orgrestore/").status_code == 200
    assert client.get("/admin/tenancy/replicageneration/add/").status_code == 403
