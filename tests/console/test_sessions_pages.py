"""The session pages' shells (their data comes from the JSON API; see test_browser_live.py)."""


def test_sessions_list_page_renders_for_a_member(member):
    from tests.console.conftest import signed_in

    response = signed_in(member).get("/console/sessions/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="sessions-table"' in html and "console/sessions.js" in html


def test_session_page_carries_its_id_and_controls(admin_client):
    response = admin_client.get("/console/sessions/sess_0123abcd/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-session="sess_0123abcd"' in html
    for command in ("pause", "resume", "stop", "message"):
        assert f'data-command="{command}"' in html


def test_session_page_refuses_an_id_that_cannot_be_one(admin_client):
    assert admin_client.get("/console/sessions/" + "x" * 129 + "/").status_code == 404
