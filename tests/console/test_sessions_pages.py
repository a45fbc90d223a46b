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
