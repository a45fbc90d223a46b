"""Sign in, sign out, the org switcher and the no-org page."""

from django.test import Client

from tenancy.principal import SESSION_ORG_KEY
from tests.console.conftest import signed_in


def test_root_redirects_to_the_console(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/console/"


def test_console_pages_send_anonymous_visitors_to_login(client):
    for path in ("/console/", "/console/agents/", "/console/keys/", "/console/billing/"):
        response = client.get(path)
        assert response.status_code == 302, path
        assert response["Location"].startswith("/console/login/?next="), path


def test_login_with_the_right_password_lands_on_the_dashboard(org_a):
    client = Client()
    page = client.get("/console/login/")
    assert page.status_code == 200
    assert b"csrfmiddlewaretoken" in page.content
    response = client.post("/console/login/", {"username": org_a.user.username, "password": "pw"})
    assert response.status_code == 302
    assert response["Location"] == "/console/"
    dashboard = client.get("/console/")
    assert dashboard.status_code == 200
    assert org_a.slug in dashboard.content.decode()
    assert client.session["_auth_user_id"] == str(org_a.user.pk)


def test_login_with_a_wrong_password_says_so_and_signs_nobody_in(org_a):
    client = Client()
    response = client.post("/console/login/", {"username": org_a.user.username, "password": "nope"})
    assert response.status_code == 200
    assert "do not match an account" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_logout_is_a_post_and_ends_the_session(admin_client):
    assert admin_client.get("/console/logout/").status_code == 405
    response = admin_client.post("/console/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/console/login/"
    assert "_auth_user_id" not in admin_client.session
    assert admin_client.get("/console/").status_code == 302


def test_org_switcher_lists_only_the_users_own_orgs(make_org):
    a = make_org("sa", username="multi")
    b = make_org("sb", username="multi")
    other = make_org("sc")
    client = signed_in(a)
    html = client.get("/console/").content.decode()
    assert 'id="org-switch"' in html
    assert f'value="{a.slug}"' in html and f'value="{b.slug}"' in html
    assert other.slug not in html


def test_switching_org_acts_for_the_chosen_org(make_org, make_agent):
    a = make_org("sa", username="multi")
    b = make_org("sb", username="multi")
    make_agent(b, "only-in-b")
    client = signed_in(a)
    assert "only-in-b" not in client.get("/console/agents/").content.decode()
    response = client.post("/console/org/", {"org": b.slug, "next": "/console/agents/"})
    assert response.status_code == 302
    assert response["Location"] == "/console/agents/"
    assert client.session[SESSION_ORG_KEY] == b.slug
    assert "only-in-b" in client.get("/console/agents/").content.decode()


def test_switching_to_an_org_the_user_is_not_in_is_refused(make_org, make_agent):
    a = make_org("sa")
    stranger = make_org("sx")
    make_agent(stranger, "secret-agent")
    client = signed_in(a)
    response = client.post("/console/org/", {"org": stranger.slug})
    assert response.status_code == 400
    assert SESSION_ORG_KEY not in client.session
    assert "secret-agent" not in client.get("/console/agents/").content.decode()


def test_switch_never_redirects_off_site(org_a):
    client = signed_in(org_a)
    response = client.post("/console/org/", {"org": org_a.slug, "next": "https://evil.example/"})
    assert response.status_code == 302
    assert response["Location"] == "/console/"


def test_a_user_without_an_org_is_told_what_to_do(db):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("loner", password="pw")
    client = Client()
    client.force_login(user)
    response = client.get("/console/agents/")
    assert response.status_code == 200
    assert "You are not in an org yet" in response.content.decode()
