"""Agent pages: list with run counts, create/edit/delete through the API's services, history."""

import html
import json
import re
from urllib.parse import unquote

import pytest

from agents.models import Agent
from runs.models import Run


def _agents(handle) -> list[str]:
    with handle.context():
        return sorted(Agent.objects.values_list("name", flat=True))


def test_agent_list_shows_each_agent_with_its_run_count(org_a, admin_client, make_agent, make_runs):
    busy = make_agent(org_a, "busy")
    make_agent(org_a, "idle")
    make_runs(org_a, busy, 3)
    make_runs(org_a, busy, 2, status="error")
    response = admin_client.get("/console/agents/")
    assert response.status_code == 200
    html = response.content.decode()
    busy_row = html.split('data-agent="busy"')[1].split("</tr>")[0]
    idle_row = html.split('data-agent="idle"')[1].split("</tr>")[0]
    assert '<td class="num run-count">5</td>' in busy_row
    assert '<td class="num run-count">0</td>' in idle_row


def test_empty_agent_list_tells_an_admin_to_create_one(admin_client):
    html = admin_client.get("/console/agents/").content.decode()
    assert "No platform agents yet" in html
    assert 'href="/console/agents/new/"' in html


def test_empty_agent_list_tells_a_member_to_ask_an_admin(member):
    from tests.console.conftest import signed_in

    html = signed_in(member).get("/console/agents/").content.decode()
    assert "ask an admin" in html
    assert "/console/agents/new/" not in html


def test_create_form_defines_the_agent(org_a, admin_client, upstream):
    response = admin_client.post(
        "/console/agents/new/",
        {"name": "triage", "model": "best", "instructions": "Be brief.", "tools": "calculator,\ncurrent_time",
         "execution_mode": "one-shot", "schedule": "", "timezone": "UTC", "description": " sorts tickets "},
    )
    assert response.status_code == 302
    assert response["Location"] == "/console/agents/triage/"
    with org_a.context():
        agent = Agent.objects.get(name="triage")
        assert (agent.model, agent.instructions, agent.tools, agent.description) == ("best", "Be brief.", ["calculator", "current_time"], "sorts tickets")


@pytest.mark.parametrize(
    "fields",
    [
        {"name": ""},
        {"name": "bad name!"},
        {"name": "ok", "execution_mode": "long-running", "schedule": ""},
        {"name": "ok", "execution_mode": "long-running", "schedule": "61 * * * *"},
        {"name": "ok", "timezone": "Mars/Olympus"},
        {"name": "ok", "model": "not-served"},
    ],
    ids=["blank-name", "bad-name", "no-cron", "bad-cron", "bad-zone", "unknown-model"],
)
def test_create_form_refuses_what_the_api_refuses_with_the_same_words(org_a, admin_client, upstream, fields):
    wire = {"name": fields["name"]}
    for form_key, wire_key in (("execution_mode", "executionMode"), ("schedule", "schedule"), ("timezone", "timezone"), ("model", "model")):
        if form_key in fields:
            wire[wire_key] = fields[form_key]
    api = org_a.client.post("/v1/agents", data=json.dumps(wire), content_type="application/json")
    assert api.status_code == 400
    response = admin_client.post("/console/agents/new/", {"execution_mode": "one-shot", "timezone": "UTC", **fields})
    assert response.status_code == 400
    assert list(response.context["field_errors"].values()) == [api.json()["error"]]  # one bad field, the API's words
    assert api.json()["error"] in response.content.decode().replace("&#x27;", "'").replace("&quot;", '"')
    assert _agents(org_a) == []


def test_create_form_refuses_a_duplicate_name(org_a, admin_client, make_agent):
    make_agent(org_a, "twin", instructions="first")
    response = admin_client.post("/console/agents/new/", {"name": "twin", "instructions": "second", "execution_mode": "one-shot"})
    assert response.status_code == 400
    assert response.context["error"] == "agent already exists in this org"
    with org_a.context():
        assert Agent.objects.get(name="twin").instructions == "first"


def test_edit_form_changes_the_agent_but_never_its_name(org_a, admin_client, make_agent):
    make_agent(org_a, "editme", instructions="old")
    form = admin_client.get("/console/agents/editme/edit/")
    assert form.status_code == 200 and "old" in form.content.decode()
    response = admin_client.post(
        "/console/agents/editme/edit/",
        {"name": "renamed", "model": "gpt-4o-mini", "instructions": "new", "execution_mode": "long-running", "schedule": "*/5 * * * *", "timezone": "UTC"},
    )
    assert response.status_code == 302
    with org_a.context():
        agent = Agent.objects.get(name="editme")
        assert (agent.instructions, agent.execution_mode, agent.schedule) == ("new", "long-running", "*/5 * * * *")
    assert _agents(org_a) == ["editme"]


def test_edit_form_shows_the_api_message_and_keeps_the_agent(org_a, admin_client, make_agent):
    make_agent(org_a, "keepme", instructions="old")
    response = admin_client.post("/console/agents/keepme/edit/", {"model": "gpt-4o-mini", "instructions": "new", "execution_mode": "long-running", "schedule": "", "timezone": "UTC"})
    assert response.status_code == 400
    assert list(response.context["field_errors"].values()) == ["a long-running agent requires a 'schedule' (5-field cron)"]
    with org_a.context():
        assert Agent.objects.get(name="keepme").instructions == "old"


def test_delete_removes_the_agent_and_its_runs(org_a, admin_client, make_agent, make_runs):
    agent = make_agent(org_a, "doomed")
    make_runs(org_a, agent, 2)
    confirm = admin_client.get("/console/agents/doomed/delete/")
    assert "2 recorded runs" in confirm.content.decode()
    response = admin_client.post("/console/agents/doomed/delete/")
    assert response.status_code == 302
    assert _agents(org_a) == []
    with org_a.context():
        assert Run.objects.count() == 0


def test_another_orgs_agent_is_a_404_like_a_missing_one(org_a, org_b, admin_client, make_agent):
    theirs = make_agent(org_b, "theirs")
    for path in (f"/console/agents/{theirs.name}/", f"/console/agents/{theirs.id}/", "/console/agents/nope/"):
        response = admin_client.get(path)
        assert response.status_code == 404, path
        assert "theirs" not in response.content.decode()
    assert admin_client.post(f"/console/agents/{theirs.id}/delete/").status_code == 404
    assert _agents(org_b) == ["theirs"]


def test_detail_page_shows_recent_runs_and_the_run_form(org_a, admin_client, make_agent, make_runs):
    agent = make_agent(org_a, "shown")
    make_runs(org_a, agent, 1, status="error")
    html = admin_client.get("/console/agents/shown/").content.decode()
    assert 'id="run-form"' in html
    assert f'data-run-url="/v1/agents/{agent.id}/run"' in html
    assert "error 0" in html


def test_run_history_pages_newest_first(org_a, admin_client, make_agent, make_runs):
    agent = make_agent(org_a, "paged")
    runs = make_runs(org_a, agent, 25)
    first = admin_client.get("/console/agents/paged/runs/")
    older = re.search(r'href="\?cursor=([^"]+)" rel="next"', first.content.decode())
    second = admin_client.get("/console/agents/paged/runs/", {"cursor": unquote(html.unescape(older.group(1)))})
    forged = admin_client.get("/console/agents/paged/runs/?cursor=AAA")
    ids = lambda r: [row.split('"')[0] for row in r.content.decode().split('data-run="')[1:]]  # noqa: E731
    assert ids(first) == [r.id for r in reversed(runs)][:20]
    assert ids(second) == [r.id for r in reversed(runs)][20:]
    assert 'rel="next"' not in second.content.decode() and "25 runs" in first.content.decode()
    assert forged.status_code == 302 and forged["Location"] == "/console/agents/paged/runs/"


def test_run_history_of_an_agent_without_runs_says_how_to_run_it(org_a, admin_client, make_agent):
    make_agent(org_a, "fresh")
    html = admin_client.get("/console/agents/fresh/runs/").content.decode()
    assert "No runs yet" in html


def test_the_form_sets_refuses_and_clears_generation_settings(org_a, admin_client, make_agent):
    make_agent(org_a, "tuned")
    base = {"model": "test-model", "instructions": "", "execution_mode": "one-shot", "schedule": "", "timezone": "UTC"}

    ok = admin_client.post("/console/agents/tuned/edit/", {**base, "max_tokens": "256", "temperature": "0.2", "top_p": "0.9"})
    assert ok.status_code == 302
    with org_a.context():
        agent = Agent.objects.get(name="tuned")
        assert (agent.max_tokens, agent.temperature, agent.top_p) == (256, 0.2, 0.9)
    page = admin_client.get("/console/agents/tuned/edit/").content.decode()
    assert 'name="max_tokens" inputmode="numeric" value="256"' in page and 'name="temperature" inputmode="decimal" value="0.2"' in page

    for fields, message in (({"max_tokens": "99999"}, "maxTokens must be an integer from 1 to 4096 (this deployment's cap)"),
                            ({"max_tokens": "many"}, "maxTokens must be an integer from 1 to 4096 (this deployment's cap)"),
                            ({"temperature": "3"}, "temperature must be a number from 0 to 2"),
                            ({"top_p": "0"}, "topP must be a number above 0 and at most 1")):
        refused = admin_client.post("/console/agents/tuned/edit/", {**base, "max_tokens": "256", "temperature": "0.2", "top_p": "0.9", **fields})
        assert refused.status_code == 400 and list(refused.context["field_errors"].values()) == [message]
    with org_a.context():
        agent = Agent.objects.get(name="tuned")
        assert (agent.max_tokens, agent.temperature, agent.top_p) == (256, 0.2, 0.9)  # a refusal changes nothing

    cleared = admin_client.post("/console/agents/tuned/edit/", {**base, "max_tokens": "", "temperature": "", "top_p": ""})
    assert cleared.status_code == 302
    with org_a.context():
        agent = Agent.objects.get(name="tuned")
        assert (agent.max_tokens, agent.temperature, agent.top_p) == (None, None, None)


def test_create_form_refuses_a_credential_in_the_instructions_as_the_api_does(org_a, admin_client, upstream):
    from tests.support.credentials import credential_corpus

    token = next(value for name, _text, value in credential_corpus() if name == "github-classic-pat")
    api = org_a.client.post("/v1/agents", data=json.dumps({"name": "leaky", "instructions": f"use {token}"}), content_type="application/json")
    assert api.status_code == 422 and api.json()["code"] == "secret_in_transcript"
    assert api.json()["findings"][0]["field"] == "instructions"
    response = admin_client.post("/console/agents/new/", {"name": "leaky", "instructions": f"use {token}", "execution_mode": "one-shot", "timezone": "UTC"})
    assert response.status_code == 400  # the console's answer to any refused form
    assert response.context["error"] == api.json()["error"]
    assert _agents(org_a) == []  # refused, nothing stored (the form shows the writer their own text again)


def test_a_run_cut_by_the_token_limit_is_marked_truncated_in_the_runs_table(org_a, admin_client, make_agent, make_runs):
    agent = make_agent(org_a, "cut")
    cut, whole = make_runs(org_a, agent, 2)
    with org_a.context():
        Run.objects.filter(pk=cut.pk).update(finish_reason="length")
        Run.objects.filter(pk=whole.pk).update(finish_reason="stop")

    page = admin_client.get("/console/agents/cut/").content.decode()

    assert page.count('data-finish="length"') == 1 and "✂ truncated" in page


def test_the_form_shows_every_error_at_once_each_under_its_field(org_a, admin_client, upstream):
    response = admin_client.post("/console/agents/new/", {
        "name": "bad name!", "execution_mode": "long-running", "schedule": "", "timezone": "Mars/Olympus",
        "max_tokens": "99999", "temperature": "3", "top_p": "0", "tools": "no_such_tool",
    })
    assert response.status_code == 400
    errors = response.context["field_errors"]
    assert list(errors) == ["name", "tools", "max_tokens", "temperature", "top_p", "execution_mode", "timezone"]  # the form's order
    page = html.unescape(response.content.decode())
    assert "7 problems to fix:" in page
    for field, message in errors.items():
        assert f'<li data-field="{field}"><a href="#id_{field}">{message}</a></li>' in page
        assert f'<p class="field-error" id="id_{field}-error">{message}</p>' in page
        assert re.search(rf'id="id_{field}" name="{field}" aria-invalid="true" aria-describedby="id_{field}-error"', page)
    assert _agents(org_a) == []


def test_each_error_matches_what_the_api_answers_for_that_field_alone(org_a, admin_client, upstream):
    response = admin_client.post("/console/agents/new/", {"name": "", "timezone": "Mars/Olympus", "temperature": "3", "execution_mode": "one-shot"})
    errors = response.context["field_errors"]
    for field, body in (("name", {"name": ""}), ("timezone", {"name": "x", "timezone": "Mars/Olympus"}), ("temperature", {"name": "x", "temperature": 3})):
        api = org_a.client.post("/v1/agents", data=json.dumps(body), content_type="application/json")
        assert api.status_code == 400 and errors[field] == api.json()["error"]


def test_the_tool_picker_offers_only_what_this_deployment_offers_and_says_why_in_words(admin_client, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = []
    page = admin_client.get("/console/agents/new/").content.decode()
    picker = page.split('id="tool-picker"')[1].split("</div>")[0]
    assert 'data-tool="calculator"' in picker and 'data-tool="http_get"' not in picker
    not_offered = page.split('id="tools-not-offered"')[1].split("</div>")[0]
    assert 'data-tool="http_get"' in not_offered
    assert "does not let agents fetch web pages" in not_offered
    assert "AGENTS_" not in page and "INFERENCE_" not in page  # no setting names shown to users


def test_the_tool_picker_offers_http_get_where_a_host_is_allowed(admin_client, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = ["example.com"]
    page = admin_client.get("/console/agents/new/").content.decode()
    assert 'data-tool="http_get"' in page.split('id="tool-picker"')[1].split("</div>")[0]
    assert 'id="tools-not-offered"' not in page


def test_a_refused_http_get_names_no_setting(org_a, admin_client, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = []
    response = admin_client.post("/console/agents/new/", {"name": "web", "tools": "http_get", "execution_mode": "one-shot", "timezone": "UTC"})
    assert response.status_code == 400
    assert response.context["field_errors"]["tools"] == (
        'tool "http_get" is off: this deployment does not let agents fetch web pages (its operator has allowed no web host)')
    assert "AGENTS_TOOL_HTTP_ALLOW" not in response.content.decode()


def test_agent_page_shows_its_generation_settings(org_a, admin_client, make_agent, settings):
    settings.AGENTS_MAX_OUTPUT_TOKENS = 4096
    settings.AGENTS_DEFAULT_OUTPUT_TOKENS = 1024
    make_agent(org_a, "tuned", max_tokens=256, temperature=0.2, top_p=0.9, context_window=8192)
    make_agent(org_a, "plain")
    page = admin_client.get("/console/agents/tuned/").content.decode()
    card = html.unescape(page.split('id="generation-settings"')[1].split("</section>")[0])
    assert re.search(r'data-setting="maxTokens"><dt>Max tokens</dt><dd>256</dd>', card)
    assert re.search(r'data-setting="temperature"><dt>Temperature</dt><dd>0.2</dd>', card)
    assert re.search(r'data-setting="topP"><dt>Top p</dt><dd>0.9</dd>', card)
    assert re.search(r'data-setting="contextWindow"><dt>Context window</dt><dd>8192 tokens</dd>', card)
    plain = html.unescape(admin_client.get("/console/agents/plain/").content.decode().split('id="generation-settings"')[1].split("</section>")[0])
    assert "not set: 1024, this deployment's default" in plain
    assert plain.count("the gateway's default") == 2  # temperature and top p
    assert "Change them" in card  # an admin may edit


def test_agent_page_says_when_the_deployment_caps_max_tokens(org_a, admin_client, make_agent, settings):
    make_agent(org_a, "big", max_tokens=3000)
    settings.AGENTS_MAX_OUTPUT_TOKENS = 2000  # lowered after the agent was saved
    card = html.unescape(admin_client.get("/console/agents/big/").content.decode().split('id="generation-settings"')[1].split("</section>")[0])
    assert "3000" in card and "this deployment allows at most 2000 per reply" in card


def test_the_form_sets_shows_and_refuses_approval_rules(org_a, admin_client, make_agent):
    make_agent(org_a, "careful")
    base = {"model": "test-model", "instructions": "", "tools": "calculator\ncurrent_time", "execution_mode": "one-shot",
            "schedule": "", "timezone": "UTC"}
    ok = admin_client.post("/console/agents/careful/edit/", {**base, "approval": "calculator, current_*"})
    assert ok.status_code == 302
    with org_a.context():
        assert Agent.objects.get(name="careful").approval == {"tools": ["calculator", "current_*"]}
    page = admin_client.get("/console/agents/careful/edit/").content.decode()
    assert 'name="approval"' in page and "calculator\ncurrent_*</textarea>" in page
    refused = admin_client.post("/console/agents/careful/edit/", {**base, "approval": "http_get"})
    assert refused.status_code == 400 and refused.context["field_errors"] == {"approval": "approval.tools[0]: 'http_get' names none of this agent's tools"}
    # Every bad entry at once, under the field (issue 57: only the first one was reported).
    several = admin_client.post("/console/agents/careful/edit/", {**base, "approval": "http_get, calculator, sh*ll, agent_*"})
    assert several.status_code == 400
    assert several.context["field_errors"]["approval"] == ("approval.tools[0]: 'http_get' names none of this agent's tools; "
                                                           "approval.tools[2]: '*' may only end a prefix; "
                                                           "approval.tools[3]: 'agent_*' names none of this agent's tools")
    assert 'id="id_approval-error"' in several.content.decode()
    with org_a.context():
        assert Agent.objects.get(name="careful").approval == {"tools": ["calculator", "current_*"]}


# --- an identity agent's capability manifest (issue 55) ------------------------------------

def _section(response, anchor: str = 'id="manifest"') -> str:
    assert response.status_code == 200
    page = response.content.decode()
    return page.split(anchor, 1)[1].split("</section>", 1)[0]


@pytest.mark.django_db
def test_an_identity_agents_page_shows_its_manifest_and_that_it_verifies(org_a, admin_client):
    from tests.identity.test_manifests import VECTORS, agent_with_vector_key, register

    agent, token = agent_with_vector_key(org_a)
    assert register(org_a, agent, token, VECTORS["valid"][1]["manifest"]).status_code == 201

    section = _section(admin_client.get("/console/agents/echo_bot/"))

    assert 'data-state="verifies"' in section and "Signature verifies" in section and "does not verify" not in section
    assert f"<code>{VECTORS['agent_keys'][0]['kid']}</code>" in section
    card = VECTORS["valid"][1]["manifest"]
    for skill in card["skills"]:
        assert f'data-skill="{html.escape(skill["id"])}"' in section
    extension = card["capabilities"]["extensions"][0]["params"]
    assert f"<code>{extension['envelopeVersion']}</code>" in section
    assert all(f'<span class="chip">{t}</span>' in section for t in extension["transports"])


@pytest.mark.django_db
def test_an_identity_agent_with_no_manifest_says_none_is_registered(org_a, admin_client):
    from tests.identity.conftest import create_agent

    created = create_agent(org_a.client, display_name="Quiet", custom_id="quiet_bot").json()

    section = _section(admin_client.get("/console/agents/quiet_bot/"))

    assert 'data-state="none"' in section and "No manifest registered" in section
    assert f"/v1/identity/agents/{created['agent_id']}/manifest" in section and "Signature" not in section


@pytest.mark.django_db
def test_a_manifest_whose_key_was_revoked_shows_it_does_not_verify(org_a, admin_client):
    from tests.identity.conftest import post
    from tests.identity.test_manifests import VECTORS, agent_with_vector_key, register

    agent, token = agent_with_vector_key(org_a)
    register(org_a, agent, token, VECTORS["valid"][0]["manifest"])
    assert post(org_a.client, f"/v1/identity/agents/{agent['agent_id']}/token/regenerate", {"emergency": True}).status_code == 200

    section = _section(admin_client.get("/console/agents/echo_bot/"))

    assert 'data-state="does-not-verify"' in section and "Signature does not verify" in section
    assert "no signature of the manifest verifies with a signing key of the agent: signatures" in section and "now revoked" in section


@pytest.mark.django_db
def test_a_platform_agents_page_has_no_manifest_section(org_a, admin_client, make_agent):
    make_agent(org_a, "writer")

    response = admin_client.get("/console/agents/writer/")

    assert response.status_code == 200 and b'id="manifest"' not in response.content
