"""The session pages' shells (their data comes from the JSON API; see test_browser_live.py)."""


def test_sessions_list_page_renders_for_a_member(member):
    from tests.console.conftest import signed_in

    response = signed_in(member).get("/console/sessions/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="sessions-table"' in html and "console/sessions.js" in html


def _session(handle) -> str:
    from sessions import services

    with handle.context():
        return services.session_create(agent="coder", actor="t").id


def test_session_page_carries_its_id_and_controls(org_a, admin_client):
    session_id = _session(org_a)
    response = admin_client.get(f"/console/sessions/{session_id}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-session="{session_id}"' in html
    for command in ("pause", "resume", "stop", "message"):
        assert f'data-command="{command}"' in html


def test_session_page_refuses_an_id_that_cannot_be_one(admin_client):
    assert admin_client.get("/console/sessions/" + "x" * 129 + "/").status_code == 404


def test_session_page_of_an_unknown_id_is_404(admin_client):
    assert admin_client.get("/console/sessions/sess_0123abcd/").status_code == 404


def test_session_page_of_another_orgs_session_is_the_same_404(org_b, admin_client):
    theirs = admin_client.get(f"/console/sessions/{_session(org_b)}/")
    unknown = admin_client.get("/console/sessions/sess_0123abcd/")
    assert theirs.status_code == unknown.status_code == 404


# --- publish / unpublish (issue 34): the API's session_update behind a form on the page -------

def _stored(handle, session_id: str) -> tuple[bool, str]:
    from sessions.models import Session

    with handle.context():
        row = Session.objects.get(pk=session_id)
        return row.published, row.project


def test_unpublished_session_page_offers_publish_with_a_project(org_a, admin_client):
    session_id = _session(org_a)
    html = admin_client.get(f"/console/sessions/{session_id}/").content.decode()
    assert 'id="publish-card"' in html and 'name="project"' in html and ">Publish</button>" in html
    assert "Not published." in html


def test_publish_with_a_project_makes_the_build_public(org_a, admin_client, client):
    session_id = _session(org_a)
    response = admin_client.post(f"/console/sessions/{session_id}/publish/", {"action": "publish", "project": "todo-app"}, follow=True)
    assert response.redirect_chain == [(f"/console/sessions/{session_id}/", 302)]
    assert _stored(org_a, session_id) == (True, "todo-app")
    html = response.content.decode()
    build = f"/builds/{org_a.slug}/todo-app/{session_id}/"
    assert "Published as a public build of project todo-app." in html and f'href="{build}"' in html and ">Unpublish</button>" in html
    assert client.get(build).status_code == 200  # anyone, signed in or not


def test_publish_without_a_project_is_refused_in_the_apis_words(org_a, admin_client):
    from sessions.fields import PUBLISH_MESSAGE

    session_id = _session(org_a)
    api = org_a.client.patch(f"/v1/agents/sessions/{session_id}", {"published": True}, content_type="application/json")
    assert api.status_code == 400 and api.json()["error"] == PUBLISH_MESSAGE
    response = admin_client.post(f"/console/sessions/{session_id}/publish/", {"action": "publish", "project": ""}, follow=True)
    assert f"Not published: {PUBLISH_MESSAGE}." in response.content.decode()
    assert _stored(org_a, session_id) == (False, "")


def test_publish_with_a_project_that_is_no_slug_is_refused_and_nothing_changes(org_a, admin_client):
    session_id = _session(org_a)
    response = admin_client.post(f"/console/sessions/{session_id}/publish/", {"action": "publish", "project": "no spaces/here"}, follow=True)
    assert "Not published:" in response.content.decode()
    assert _stored(org_a, session_id) == (False, "")


def test_unpublish_keeps_the_project_and_closes_the_public_page(org_a, admin_client, client):
    session_id = _session(org_a)
    admin_client.post(f"/console/sessions/{session_id}/publish/", {"action": "publish", "project": "todo-app"})
    response = admin_client.post(f"/console/sessions/{session_id}/publish/", {"action": "unpublish"}, follow=True)
    assert "Unpublished: the build is no longer public." in response.content.decode()
    assert _stored(org_a, session_id) == (False, "todo-app")
    assert client.get(f"/builds/{org_a.slug}/todo-app/{session_id}/").status_code == 404


def test_publish_is_post_only_and_another_orgs_session_is_404(org_a, org_b, admin_client):
    session_id = _session(org_a)
    assert admin_client.get(f"/console/sessions/{session_id}/publish/").status_code == 405
    theirs = _session(org_b)
    assert admin_client.post(f"/console/sessions/{theirs}/publish/", {"action": "publish", "project": "x"}).status_code == 404
    assert _stored(org_b, theirs) == (False, "")
