"""The credential corpus: one sample per rule of `sessions.scanner`, fresh random values each call.

`credential_corpus()` → `[(rule, text, value)]`: `text` is a line or a few lines of prose
carrying the credential `value` the rule must find (the reference's rules and every
detect-secrets plugin the scanner uses). `scanner_rules()` names every rule the scanner has,
so a test can prove the corpus misses none. The shapes of `tests/sessions/test_scanner.py`'s
`secret_corpus` (nested payloads) are added by the tests that use both.
"""

from __future__ import annotations

import base64
import json
import secrets
import string

import jwt

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _pem(kind: str = "RSA ") -> str:
    body = base64.b64encode(secrets.token_bytes(300)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{lines}\n-----END {kind}PRIVATE KEY-----"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def credential_corpus() -> list[tuple[str, str, str]]:
    """Return `(rule, text, value)` for every rule of the scanner (see module doc)."""
    pem = _pem()
    openssh = _pem("OPENSSH ")
    agent_token = f"agt_weather-bot_{secrets.token_hex(8)}_{secrets.token_hex(24)}"  # identity agents' tokens
    webhook_secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()  # Standard Webhooks secrets
    token = jwt.encode({"sub": "user-1", "exp": 4102444800}, secrets.token_hex(32), algorithm="HS256")
    discord = "M" + _rand(23) + "." + _rand(6) + "." + _rand(27)
    telegram = _rand(9, string.digits) + ":" + _rand(35)
    sendgrid = "SG." + _rand(22) + "." + _rand(43)
    azure = _rand(86) + "=="
    openai_key = "sk-" + _rand(20) + "T3BlbkFJ" + _rand(20)
    mailchimp = _rand(32, "0123456789abcdef") + "-us12"
    password = _rand(28)
    aws_secret = _rand(40, ALNUM + "/+")
    aws_quoted = _rand(40)
    return [
        ("private-key", f"here is the deploy key:\n{pem}\nuse it with care.", pem),
        ("private-key", f"the machine key\n{openssh}\nend of key", openssh),
        ("aws-access-key-id", f"export AWS_ACCESS_KEY_ID={'AKIA' + _rand(16, string.ascii_uppercase + '234567')} now", None),
        ("aws-secret-access-key", f"set aws_secret_access_key = {aws_secret} in the profile", aws_secret),
        ("aws-secret-access-key", f'the aws secret key is "{aws_quoted}" ok', aws_quoted),
        ("gcp-api-key", f"maps key AIza{_rand(35)} for the map", None),
        ("github-token", f"push with ghp_{_rand(36)} then stop", None),
        ("github-token", f"token gho_{_rand(40)}, then", None),
        ("github-pat-fine", f"fine-grained github_pat_{_rand(82, ALNUM + '_')} here", None),
        ("slack-token", f"SLACK_TOKEN=xoxb-{_rand(12, string.digits)}-{_rand(13, string.digits)}-{_rand(24, LOWER_ALNUM)} ok", None),
        ("slack-token", f"slack xoxp-{_rand(30, LOWER_ALNUM)} please", None),
        ("slack-webhook", f"post to https://hooks.slack.com/services/T{_rand(9)}/B{_rand(9)}/{_rand(24)} daily", None),
        ("agent-token", f"the agent's token is {agent_token} keep it", agent_token),
        ("webhook-secret", f"verify deliveries with {webhook_secret} only", webhook_secret),
        ("stripe-secret-key", f"stripe sk_live_{_rand(40)} is live", None),
        ("npm-token", f"//registry.npmjs.org/ token is npm_{_rand(36)} today", None),
        ("npm-token", f"echo //registry.npmjs.org/:_authToken=npm_{_rand(36)} > .npmrc\nthen publish", None),
        ("jwt", f"Authorization: Bearer {token} sent", token),
        ("jwt", f"Bearer eyJ{_rand(20)}.eyJ{_rand(30)}.{_rand(30)} again", None),
        ("generic-secret", f'config:\n  db:\n    password = "{password}"\nend', password),
        ("generic-secret", f"api_key: {password} is set", password),
        ("azure-storage-key", f"DefaultEndpointsProtocol=https;AccountName=shop;AccountKey={azure};EndpointSuffix=core", None),
        ("basic-auth-credentials", f"clone https://deploy:{_rand(20)}@git.example.com/shop.git first", None),
        ("discord-bot-token", f"discord bot {discord} online", discord),
        ("gitlab-token", f"gitlab glpat-{_rand(20)} for ci", None),
        ("mailchimp-key", f"mailchimp {mailchimp} list", mailchimp),
        ("openai-key", f"OPENAI_API_KEY={openai_key} in env", openai_key),
        ("pypi-token", f"upload with pypi-AgEIcHlwaS5vcmc{_rand(80, ALNUM + '-_')} to pypi", None),
        ("sendgrid-key", f"mail via {sendgrid} fast", sendgrid),
        ("square-oauth-secret", f"square sq0csp-{_rand(43)} prod", None),
        ("telegram-bot-token", f"telegram {telegram} bot", telegram),
        ("twilio-key", f"twilio AC{_rand(32, LOWER_ALNUM)} account", None),
    ]


def scanner_rules() -> set[str]:
    """Return every rule id the scanner reports (reference rules and library plugins)."""
    from sessions.scanner import _REFERENCE_RULES, _plugins

    rules = {rule for rule, _, _, _ in _REFERENCE_RULES}
    for plugin in _plugins():
        rules.update(rule for rule, _ in plugin.rules)
    return rules


def raw_values(text: str) -> list[str]:
    """Return the raw credential values `scan_text` finds in `text` (to grep for them afterwards)."""
    from sessions.scanner import _kept_hits

    return [hit.value for hit in _kept_hits(text)]


def as_json(value) -> str:
    """Return `value` as compact JSON (how it sits in a stored payload)."""
    return json.dumps(value, separators=(",", ":"))
