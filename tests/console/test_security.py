"""Security of the console: CSRF on every form, cookie flags, one vocabulary."""

import json
import os
import re
import subprocess
import sys

import pytest
from django.test import Client

from tests.support.live import ROOT


@pytest.fixture
def strict_client(org_a):
    client = Client(enforce_csrf_checks=True)
    org_a.user.refresh_from_db()
    client.force_login(org_a.user)
    return client


@pytest.mark.parametrize(
    "path,data",
    [
        ("/console/agents/new/", {"name": "x"}),
        ("/console/keys/", {"name": "x"}),
        ("/console/logout/", {}),
        ("/console/org/", {"org": "whatever"}),
        ("/console/login/", {"username": "a", "password": "b"}),
    ],
)
def test_forms_refuse_a_post_without_the_csrf_token(strict_client, org_a, path, data):
    from tenancy.models import ApiKey

    keys = ApiKey.objects.count()
    response = strict_client.post(path, data)
    assert response.status_code == 403
    assert ApiKey.objects.count() == keys
    with org_a.context():
        from agents.models import Agent

        assert Agent.objects.count() == 0


def test_every_console_form_carries_the_csrf_token(org_a, admin_client, make_agent):
    make_agent(org_a, "formy")
    for path in ("/console/agents/new/", "/console/agents/formy/edit/", "/console/agents/formy/delete/", "/console/keys/", "/console/agents/formy/"):
        html = admin_client.get(path).content.decode()
        forms = re.findall(r"<form\b.*?</form>", html, flags=re.S)
        assert forms, path
        for form in forms:
            if 'method="post"' in form or 'id="run-form"' in form:
                assert "csrfmiddlewaretoken" in form, (path, form[:120])


def test_the_json_api_refuses_a_session_write_without_the_csrf_token(strict_client):
    response = strict_client.post("/v1/agents", data=json.dumps({"name": "sneaky"}), content_type="application/json")
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_session_cookie_is_httponly_and_samesite_lax(org_a):
    client = Client()
    response = client.post("/console/login/", {"username": org_a.user.username, "password": "pw"})
    cookie = response.cookies["sessionid"]
    assert cookie["httponly"] is True
    assert cookie["samesite"] == "Lax"
    assert not cookie["secure"]


def test_cookies_are_secure_when_agents_https_is_set():
    env = {**os.environ, "AGENTS_HTTPS": "1", "DJANGO_SETTINGS_MODULE": "agents_site.settings", "PYTHONPATH": str(ROOT)}
    code = "from django.conf import settings; print(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE)"
    out = subprocess.run([sys.executable, "-c", "import django; django.setup(); " + code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_pages_load_the_one_vocabulary_module_before_the_scripts(admin_client):
    html = admin_client.get("/console/").content.decode()
    scripts = re.findall(r'<script src="[^"]*/console/([a-z_]+\.js)"', html)
    assert scripts[:2] == ["vocabulary.js", "console.js"]
    assert "agents-vocabulary" not in html  # no second copy in the page


def test_static_scripts_hold_no_copy_of_the_vocabulary():
    words = {"running", "paused", "done", "invoked", "tool-call", "#15803d", "#b91c1c"}
    for path in (ROOT / "static" / "console").glob("*.js"):
        if path.name == "vocabulary.js":
            continue  # the one module generated from agents_site/vocabulary.py (tests/console/test_vocabulary_js.py)
        text = path.read_text()
        for word in words:
            assert f'"{word}"' not in text and f"'{word}'" not in text, (path.name, word)


def test_pages_may_not_be_framed(admin_client):
    assert admin_client.get("/console/").headers["X-Frame-Options"] == "DENY"
