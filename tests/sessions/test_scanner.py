"""Credentials are refused, never stored (spec 003: POST …/events 422; reference §4)."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import secrets
import string
import subprocess
import sys
import uuid
from pathlib import Path

import jwt
import pytest

from sessions.models import Event
from sessions.scanner import mask, scan_payload, shannon_entropy
from tenancy import stores
from tests.sessions.conftest import new_session, post
from tests.support.live import ROOT
from tests.support.files import file_bytes

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
    return b"".join(file_bytes(str(path) + suffix) for suffix in ("", "-wal") if Path(str(path) + suffix).exists())


CORPUS_NAMES = frozenset(case[0] for case in secret_corpus())  # ids are names only: payloads are random per process


@pytest.mark.parametrize("name, payload, expected", secret_corpus(), ids=lambda v: v if isinstance(v, str) and v in CORPUS_NAMES else "")
def test_a_credential_is_refused_with_findings_and_stored_nowhere(org_a, caplog, name, payload, expected):
    caplog.set_level(logging.DEBUG)
    session = new_session(org_a)
    response = post(org_a.client, f"/v1/agents/sessions/{session['id']}/events", {"kind": "message", "payload": payload})
    assert response.status_code == 422
    body = response.json()
    assert body["status"] == 422 and body["code"] == "secret_in_transcript"
    rules = ", ".join(dict.fromkeys(rule for rule, _, _, _ in expected))  # every rule that fired, named
    assert body["error"] == (
        f"transcript rejected: {len(expected)} secret(s) detected ({rules}). Nothing was stored. "
        "Never paste a credential: refer to it by name (a credential the operator granted to this "
        "org, e.g. a repository's push credential), and rotate the exposed value."
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


def _reference_misses() -> list[tuple[str, str, str, str]]:
    """(name, text, rule, the value the reference's §4 rule takes) — shapes the library alone lets through."""
    aws_41 = _rand(41, ALNUM + "/+")
    gcp = "AIza" + _rand(35)
    slack = "xoxp-" + _rand(30, string.ascii_lowercase + string.digits)
    hook = "https://hooks.slack.com/services/" + _rand(30)
    github = "ghp_" + _rand(44)
    jwt_like = "eyJ" + _rand(20) + ".eyJ" + _rand(30) + "." + _rand(30)  # not base64 JSON, still token-shaped
    return [
        ("aws secret longer than 40", f"aws_secret_access_key={aws_41}", "aws-secret-access-key", aws_41[:40]),
        ("gcp key followed by a dash", f"key {gcp}-prod", "gcp-api-key", gcp),
        ("slack token without numeric parts", f"SLACK={slack}", "slack-token", slack),
        ("slack webhook of any path", f"post to {hook}", "slack-webhook", hook),
        ("github token longer than 36", f"token {github}", "github-token", github),
        ("jwt that does not decode", f"Bearer {jwt_like}", "jwt", jwt_like),
    ]


REFERENCE_MISSES = _reference_misses()


@pytest.mark.parametrize("name, text, rule, value", REFERENCE_MISSES, ids=[case[0] for case in REFERENCE_MISSES])
def test_what_the_reference_rules_catch_is_refused(name, text, rule, value):
    findings = scan_payload({"text": text})
    assert [(f.rule, f.line, f.fingerprint) for f in findings] == [(rule, 1, hashlib.sha256(value.encode()).hexdigest())]
    assert findings[0].preview == mask(value)


def test_a_payload_nested_deeper_than_the_stack_is_scanned_whole():
    github = "ghp_" + _rand(36)
    deep: object = {"text": github}
    for _ in range(3000):
        deep = [deep]
    assert [f.rule for f in scan_payload(deep)] == ["github-token"]


HOSTILE = {  # 64 KiB each; shapes that made detect-secrets' regexes backtrack for minutes or days
    "keyword then spaces": "password" + " " * (64 * 1024 - 9) + "x",
    "key then spaces": "cloudant_key" + " " * 4000 + "\nsl_key" + " " * 4000 + "\nibm_cos_hmac secret_key" + " " * 4000,
    "url prefixes": "://" * (64 * 1024 // 3),
    "jwt prefixes": "eyJ" * (64 * 1024 // 3),
    "pem headers": "-----BEGIN PRIVATE KEY-----" * (64 * 1024 // 27),
    "empty lines": "\n" * (64 * 1024),
}


def test_hostile_payloads_are_scanned_without_stalling_the_writer():
    """Each 64 KiB payload scans in well under a second; the bound here only catches a stall.

    A regex holds the GIL for its whole match, so the scan runs in a child process that can
    be killed.
    """
    code = (
        "import django; django.setup()\n"
        "from sessions.scanner import scan_payload\n"
        "from tests.sessions.test_scanner import HOSTILE\n"
        "for name, payload in HOSTILE.items():\n"
        "    scan_payload(payload)\n"
        "    print(name, flush=True)\n"
    )
    try:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agents_site.settings", "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the scanner stalled after {exc.stdout!r}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == list(HOSTILE)


def test_a_cache_key_of_44_characters_is_not_a_credential():
    assert scan_payload({"text": "cache key: " + secrets.token_urlsafe(33)}) == []


@pytest.mark.parametrize(
    "value", ["R_wlMgyczxxhRy.vGRcyAeU5", "xIj5BXuuUAHBCNXtKeyJWp.LlehLdVl", "MYf4.ZzHOCg7ta6CXghu_meYOGf7q"]
)
def test_a_random_value_with_dots_is_not_taken_for_a_name_in_code(value):
    findings = scan_payload(f"secret={value}")
    assert [(f.rule, f.fingerprint) for f in findings] == [("generic-secret", hashlib.sha256(value.encode()).hexdigest())]


@pytest.mark.parametrize(
    "line",
    [
        "password = settings.DATABASE_PASSWORD_FROM_VAULT",
        "api_key = os.environ.OPENAI_API_KEY_PRODUCTION",
        "client_secret = self.config.clientSecretValue",
        "secret: ProviderSettings.StripeWebhookSecret",
    ],
)
def test_a_name_in_code_is_not_a_credential(line):
    assert scan_payload(line) == []
