"""`manage.py scan_stored_credentials` (issue 29 item 9): stored values that the scanner flags today are
reported per org, table and column with a masked preview and fingerprint only, and nothing is rewritten.
On both stores (`AGENTS_TEST_STORES=postgres`)."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.core.management import call_command

from agents.models import Agent
from sessions.models import Event, Session
from sessions.scanner import mask
from sessions.storage_guard import suspended
from tests.support.store_scan import planted
from tests.sessions.conftest import append, new_session
from tests.support.credentials import credential_corpus

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

CORPUS = {name: value for name, _, value in credential_corpus()}


def _scan(*args) -> str:
    out = io.StringIO()
    call_command("scan_stored_credentials", *args, stdout=out)
    return out.getvalue()


def _stored_before_the_scanner_knew(org) -> dict:
    """Put credentials where they were stored raw before issue 29 (written past today's checks, as they were then)."""
    api_key, project_key, anthropic = CORPUS["api-key"], CORPUS["openai-project"], CORPUS["anthropic-api"]
    assert org.client.post("/v1/agents", {"name": "old"}, content_type="application/json").status_code == 201
    session = new_session(org, title="ordinary")
    append(org, session["id"], payload={"text": "ordinary"})
    with org.context(), planted(org):  # raw on purpose (the storage guard would mask them today): left out of the suite-end scan
        Agent.objects.filter(name="old").update(instructions=f"call the API with {project_key} when asked")
        Session.objects.filter(pk=session["id"]).update(title=f"deploy {api_key}")
        Event.objects.filter(session_id=session["id"]).update(payload=json.dumps({"text": f"the key is {anthropic}"}))
        return {"agent": list(Agent.objects.values_list("instructions", flat=True)), "title": Session.objects.get(pk=session["id"]).title,
                "events": list(Event.objects.values_list("payload", flat=True)), "session": session["id"]}


def test_stored_credentials_are_reported_per_org_table_and_column_and_nothing_is_rewritten(org_a, org_b):
    before = _stored_before_the_scanner_knew(org_a)
    assert org_b.client.post("/v1/agents", {"name": "clean", "instructions": "be brief"}, content_type="application/json").status_code == 201

    out = _scan("--org", org_a.slug, "--org", org_b.slug, "--json")
    report = json.loads(out)

    expected = {  # (table, column) → (rule, the raw value)
        ("agents_agent", "instructions"): ("openai-api-key", CORPUS["openai-project"]),
        ("agent_sessions_session", "title"): ("api-key", CORPUS["api-key"]),
        ("agent_sessions_event", "payload"): ("anthropic-api-key", CORPUS["anthropic-api"]),
    }
    got = {(f["table"], f["column"]): f for f in report["findings"]}
    assert set(got) == set(expected) and {f["org"] for f in report["findings"]} == {org_a.slug}
    for where, (rule, value) in expected.items():
        finding = got[where]
        assert (finding["rule"], finding["preview"], finding["fingerprint"]) == (rule, mask(value), hashlib.sha256(value.encode()).hexdigest())
    assert report["summary"] == [{"org": org_a.slug, "table": t, "column": c, "findings": 1} for t, c in sorted(expected)]
    assert not any(value in out for _, value in expected.values())  # masked previews and fingerprints only
    with org_a.context():  # never rewritten
        assert list(Agent.objects.values_list("instructions", flat=True)) == before["agent"]
        assert Session.objects.get(pk=before["session"]).title == before["title"]
        assert list(Event.objects.values_list("payload", flat=True)) == before["events"]


def test_the_text_report_names_each_value_and_counts_them(org_a):
    _stored_before_the_scanner_knew(org_a)

    out = _scan("--org", org_a.slug)

    lines = out.strip().splitlines()
    assert lines[-1] == ("3 stored credential(s) in 3 column(s) of 1 store(s); nothing was changed: rotate each credential, "
                         "then remove or edit the value that holds it.")
    assert f"{org_a.slug}\tagents_agent.instructions\t1 finding(s)" in lines
    assert any(line.startswith(f"{org_a.slug}\tagent_sessions_session.title\trow ") and "\tapi-key\tcritical\t" in line for line in lines)
    assert CORPUS["api-key"] not in out and mask(CORPUS["api-key"]) in out


def test_a_clean_store_reports_nothing(org_a):
    new_session(org_a, title="quarterly report")
    out = _scan("--org", org_a.slug, "--json")
    assert json.loads(out) == {"findings": [], "summary": []}


def test_without_orgs_every_store_and_the_shared_tables_are_scanned(org_a):
    from tenancy.models import ApiKey

    _stored_before_the_scanner_knew(org_a)
    with suspended():
        ApiKey.objects.filter(org=org_a.org).update(name=f"ci {CORPUS['github-classic-pat']}")

    report = json.loads(_scan("--json"))

    where = {(f["org"], f["table"], f["column"], f["rule"]) for f in report["findings"]}
    assert ("(shared)", "tenancy_apikey", "name", "github-token") in where
    assert (org_a.slug, "agent_sessions_session", "title", "api-key") in where
