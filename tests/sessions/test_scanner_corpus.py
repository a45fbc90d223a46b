"""The scanner measured on the corpora (issue 29 item 1, issue 49 item 3): recall ≥ 0.98 on 100+
credential formats in their usual contexts and ≥ 0.99 on every format × every position issue 49 lists
(`probe_corpus`), encoded credentials, false positives ≤ 0.1 % of 15,000 clean lines (the issue's bar is
0.5 %). Counts, never timings (those are in bench/scanner.py)."""

from __future__ import annotations

import math

from sessions.scanner import redact_text, rule_names, scan_payload, scan_text
from tests.support.clean_corpus import clean_documents, clean_lines
from tests.support.credentials import (
    PLATFORM_FORMATS, PUNCTUATION, credential_corpus, encoded_probes, format_names, leaked, probe_corpus, probe_positions,
)

REQUIRED_FORMATS = {  # what issue 29 names, by corpus format
    "api-key", "agent-token", "webhook-secret", "claim-key", "openai-legacy", "openai-project", "openai-service-account",
    "anthropic-api", "google-api-key", "aws-access-key-id", "aws-secret-access-key", "github-classic-pat",
    "github-fine-grained-pat", "github-oauth", "gitlab-pat", "slack-bot", "stripe-live-secret", "twilio-auth-token",
    "sendgrid", "npm", "pypi", "huggingface", "jwt-hs256", "jwt-rs256", "jwt-es256", "private-key-rsa-pkcs1",
    "private-key-openssh", "database-url-postgresql",
}

ISSUE_49_FORMATS = {  # the nine formats issue 49 found unknown, and its two partial masks
    "mailgun-private-key", "doppler-service-token", "contentful-pat", "notion-integration-secret", "pinecone",
    "tailscale-auth-key", "mapbox-secret-token", "resend", "fcm-server-key", "azure-sas-url", "django-secret-key",
}


def test_the_corpora_are_as_large_as_the_issue_asks():
    assert len(format_names()) >= 100 and REQUIRED_FORMATS | ISSUE_49_FORMATS <= format_names()
    assert len(clean_lines()) >= 10_000


def test_recall_on_the_credential_corpus_is_at_least_0_98():
    corpus = credential_corpus()
    missed = [name for name, text, value in corpus if leaked(redact_text(text)[0], value)]
    assert len(corpus) - len(missed) >= math.ceil(0.98 * len(corpus)), missed
    assert missed == []  # today: every sample (raise this bar, never lower it silently)


def test_false_positives_on_the_clean_corpus_are_at_most_0_1_percent_of_lines():
    lines = clean_lines()
    flagged = {first + finding.line - 1 for first, text in clean_documents() for finding in scan_text(text)}
    assert len(flagged) <= len(lines) // 1000, [lines[i] for i in sorted(flagged)]
    assert [lines[i].strip() for i in sorted(flagged)] == [  # the one known: a class name after `password =`
        "user, password = HTTPPasswordMgr.find_user_password(self, realm,"]


def test_masked_text_holds_no_credential():
    # A placeholder must not read as one (`postgresql://app:[redacted:…]@db` is no password).
    assert [name for name, text, _ in credential_corpus() if scan_text(redact_text(text)[0])] == []


def test_the_platforms_own_credentials_are_reported_under_their_own_rules():
    for name, text, _ in credential_corpus():
        if name in PLATFORM_FORMATS:
            assert [f.rule for f in scan_text(text)] == [PLATFORM_FORMATS[name]], name


def test_the_platforms_own_ids_are_not_credentials():
    ids = "run_0123456789abcdef0123456789abcdef sess_0123456789abcdef0123456789abcdef conv_0123456789abcdef0123456789abcdef"
    assert scan_text(ids) == [] and scan_text("x-request-id: req_0123456789abcdef01234567") == []


def test_every_rule_id_can_sit_in_a_redaction_placeholder():
    names = rule_names()
    assert len(names) > 400  # the maintained set and the platform's rules
    assert all(name and "]" not in name and ":" not in name and not any(c.isspace() for c in name) for name in names)


def test_recall_on_every_format_in_every_position_is_at_least_0_99():
    # Issue 49: bare; before and after each mark (`**`, `:`, `—`, `。`, a no-break or zero-width space…);
    # Markdown emphasis and code; CJK text; a JSON object key; a URL's user-info. ~10,000 probes.
    probes = probe_corpus()
    assert len({name.split(" ")[0] for name, _, _ in probes}) >= 95 and len(probes) >= 10_000
    missed = [name for name, text, value in probes if leaked(redact_text(text)[0], value)]
    assert len(missed) <= len(probes) // 100, missed[:40]
    assert len(missed) <= 6, missed  # today (raise this bar, never lower it silently)


def test_a_credential_followed_by_each_mark_is_masked_whole():
    key = next(value for name, _, value in credential_corpus() if name == "openai-project")
    for mark in PUNCTUATION:
        masked = redact_text(f"use **{key}{mark}** here")[0]
        assert key[:16] not in masked and key[-16:] not in masked, mark


def test_a_credential_as_a_json_object_key_is_found_in_a_payload():
    units = [value for name, _, value in credential_corpus() if name in ("anthropic-api", "openai-project", "github-classic-pat",
                                                                          "stripe-live-secret", "huggingface", "groq")]
    for unit in units:
        assert scan_payload({unit: "prod"}) and scan_payload({"env": {unit: {"tier": 1}}}), unit[:12]


def test_the_nine_formats_issue_49_found_unknown_are_reported_under_their_own_rules():
    rules = {name: [f.rule for f in scan_text(text)] for name, text, _ in credential_corpus() if name in ISSUE_49_FORMATS}
    assert rules == {
        "mailgun-private-key": ["mailgun-private-key"], "doppler-service-token": ["doppler-token"], "contentful-pat": ["contentful-pat"],
        "notion-integration-secret": ["notion-integration-secret"], "pinecone": ["pinecone-api-key"], "tailscale-auth-key": ["tailscale-key"],
        "mapbox-secret-token": ["mapbox-secret-token"], "resend": ["resend-api-key"], "fcm-server-key": ["fcm-server-key"],
        "azure-sas-url": ["azure-sas-signature", "azure-storage-account-name"], "django-secret-key": ["django-secret-key"],
    }


def test_an_azure_sas_signature_and_a_django_secret_key_are_masked_whole():
    for name in ("azure-sas-url", "django-secret-key"):
        text, value = next((t, v) for n, t, v in credential_corpus() if n == name)
        masked = redact_text(text)[0]
        assert value not in masked and not any(value[i : i + 8] in masked for i in range(len(value) - 8)), (name, masked)


def test_encoded_credentials_are_masked():
    # URL user-info base64'd and percent-encoded, Authorization: Basic, query values (issue 49).
    assert [name for name, text, value in encoded_probes() if leaked(redact_text(text)[0], value)] == []


def test_the_probe_positions_are_those_issue_49_lists():
    positions = {position for position, _ in probe_positions("ghp_x")}
    assert {"bare", "bold", "code", "cjk", "json key", "url user-info"} <= positions
    assert all(f"after {mark!r}" in positions and f"before {mark!r}" in positions for mark in PUNCTUATION)
    assert {":", "-", "**", ">", "/", "|", "}", "=", "%", "#", "~", "\u00a0", "\u200b", "…", "—", "。", "、"} <= set(PUNCTUATION)
