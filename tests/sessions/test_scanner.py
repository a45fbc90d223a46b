"""Credentials are refused, never stored (spec 003: POST …/events 422; reference §4)."""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import string
import uuid
from pathlib import Path

import jwt
import pytest

from sessions.models import Event
from sessions.scanner import mask, scan_payload, shannon_entropy
from tenancy import stores
from tests.sessions.conftest import new_session, post

ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _pem() -> str:
    body = base64.b64encode(secrets.token_bytes(600)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN RSA PRIVATE KEY-----\n{lines}\n-----END RSA PRIVATE KEY-----"


def secret_corpus() -> list[tuple[str, object, list[tuple[str, str, int, str]]]]:
    """(name, payload, [(rule, severity, line, secret value)]) — fresh random values each run."""
    pem = _pem()
    access_key = "AKIA" + _rand(16, string.ascii_uppercase + "234567")
    secret_key = _rand(40, ALNUM + "/+")
    github = "ghp_" + _rand(36)
    slack = f"xoxb-{_rand(12, string.digits)}-{_rand(13, string.digits)}-{_rand(24, string.ascii_lowercase + string.digits)}"
    stripe = "sk_live_" + _rand(40)
    npm = "npm_" + _rand(36)
    token = jwt.encode({"sub": "user-1", "org": "shop", "exp": 4102444800}, secrets.token_hex(32), algorithm="HS256")
    password = _rand(28)
    return [
        ("private key block", {"text": f"here is the deploy key:\n{pem}\nuse it"}, [("private-key", "critical", 2, pem)]),
        (
            "aws key pair",
            f"export AWS_ACCESS_KEY_ID={access_key}\naws_secret_access_key = {secret_key}",
            [("aws-access-key-id", "critical", 1, access_key), ("aws-secret-access-key", "critical", 2, secret_key)],
        ),
        ("github token", {"text": f"git push https://github.com/x/y with {github}"}, [("github-token", "high", 1, github)]),
        ("slack token", ["first line", f"SLACK_TOKEN={slack}"], [("slack-token", "high", 2, slack)]),
        ("stripe key", {"env": {"STRIPE": stripe}}, [("stripe-secret-key", "critical", 2, stripe)]),
        ("npm token", f"//registry.npmjs.org/ token is {npm}", [("npm-token", "high", 1, npm)]),
        ("jwt", {"headers": {"Authorization": f"Bearer {token}"}}, [("jwt", "medium", 2, token)]),
        ("password assignment", {"text": f'config:\n  db:\n    password = "{password}"'}, [("generic-secret", "medium", 3, password)]),
        ("password field", {"password": password}, [("generic-secret", "medium", 1, password)]),
    ]


BENIGN = [
    "We shipped the checkout page on Tuesday; the tests pass and the build is green.",
    {"text": "def digest(data):\n    return hashlib.sha256(data).hexdigest()\n", "lang": "python"},
    {"sha256": hashlib.sha256(b"build").hexdigest(), "md5": hashlib.md5(b"build").hexdigest(), "commit": secrets.token_hex(20)},
    {"text": f"run {uuid.uuid4()} finished", "ids": [str(uuid.uuid4()) for _ in range(5)], "requestId": str(uuid.uuid4())},
    {"text": "the deploy key lives at kms://projects/shop/deploy-key", "secret": "projects/shop/deploy-key"},
    "api_key: hanzo/projects/shop/deploy-key",
    {"password": "kms://prod/db-password", "apiKey": "${SHOP_API_KEY}"},
    "password = settings.DATABASE_PASSWORD_FROM_VAULT",
    "password = changeme  # low entropy placeholder",
    "api_key = aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    {"tool": "read_file", "args": {"path": "src/secrets/README.md"}, "result": "Secrets are referenced by name."},
    "token budget: 12000 tokens; APACHECONFIG is a word",
]


def _store_bytes(slug: str) -> bytes:
    path = stores.store_path(slug)
    return b"".join(Path(str(path) + suffix).read_bytes() for suffix in ("", "-wal") if Path(str(path) + suffix).exists())


@pytest.mark.parametrize("name, payload, expected", secret_corpus(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_credential_is_refused_with_findings_and_stored_nowhere(org_a, caplog, name, payload, expected):
    caplog.set_level(logging.DEBUG)
    session = new_session(org_a)
    response = post(org_a.client, f"/v1/agents/sessions/{session['id']}/events", {"kind": "message", "payload": payload})
    assert response.status_code == 422
    body = response.json()
    assert body["status"] == 422 and body["code"] == "secret_in_transcript"
    assert body["error"] == (
        f"transcript rejected: {len(expected)} secret(s) detected ({expected[0][0]}). "
        "Secrets belong in KMS and are referenced by name; rotate the exposed value."
    )
    assert body["findings"] == [
        {"rule": rule, "severity": severity, "line": line, "preview": mask(value), "fingerprint": hashlib.sha256(value.encode()).hexdigest()}
        for rule, severity, line, value in expected
    ]
    with org_a.context():
        assert Event.objects.count() == 0
    store = _store_bytes(org_a.slug)
    for _, _, _, value in expected:
        assert value not in response.content.decode()
        assert value not in caplog.text
        assert value.encode() not in store


@pytest.mark.parametrize("payload", BENIGN)
def test_ordinary_transcripts_are_admitted(org_a, payload):
    session = new_session(org_a)
    response = post(org_a.client, f"/v1/agents/sessions/{session['id']}/events", {"kind": "message", "payload": payload})
    assert response.status_code == 201, response.json()
    assert response.json()["payload"] == payload
    with org_a.context():
        assert Event.objects.count() == 1


def test_mask_keeps_four_characters_each_side_and_hides_short_values():
    assert mask("AKIAABCDEFGHIJKLMNOP") == "AKIA************MNOP"
    assert mask("hunter22") == "********" and mask("abc") == "***"
    assert mask("123456789") == "1234*6789"


def test_findings_sort_by_severity_then_line_then_rule():
    jwt_token = jwt.encode({"sub": "x"}, "k" * 32, algorithm="HS256")
    github = "ghp_" + _rand(36)
    access_key = "AKIA" + _rand(16, string.ascii_uppercase)
    findings = scan_payload(f"{jwt_token}\n{github}\nkey {access_key}")
    assert [(f.rule, f.line) for f in findings] == [("aws-access-key-id", 3), ("github-token", 2), ("jwt", 1)]


def test_one_value_found_twice_is_reported_once():
    github = "ghp_" + _rand(36)
    findings = scan_payload(f"password = {github}")
    assert [f.rule for f in findings] == ["github-token"]


def test_the_generic_rule_needs_entropy():
    assert shannon_entropy("aaaa") == 0.0 and shannon_entropy("ab") == 1.0
    assert scan_payload("password = abababababababababab") == []
    assert [f.rule for f in scan_payload("password = " + _rand(24))] == ["generic-secret"]
