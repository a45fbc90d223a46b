"""The platform's own credential rules, beside the maintained rule set (`sessions.scanner`).

Three kinds, all regular expressions run with Python's `re` over the whole text (each written to
run in linear time: no nested unbounded repeats, a PEM block never runs past the next BEGIN):

* the reference's rules (reference §4), applied exactly as the reference writes them, so that
  whatever §4 catches is caught here and keeps its rule id (`github-token`, `aws-access-key-id`,
  `generic-secret`…);
* this platform's own credentials: `ak_…` API keys, `agt_…` identity agents' tokens,
  `whsec_…` Standard Webhooks secrets, `tgtk_…` run-target claim keys;
* gap rules: formats the maintained rule set missed on the corpus of `tests/support/
  credentials.py` (`bench/scanner.py --misses` lists them): Google OAuth client secrets, Azure AD
  client secrets, Stripe test keys, Mailchimp keys, Telegram and Discord bot tokens, Discord and
  Teams webhooks, PlanetScale tokens, HTTP Basic credentials, and secrets assigned to an
  environment variable named for one (`DD_API_KEY=…`, `TWILIO_AUTH_TOKEN=…`).

A keyword rule (`generic-secret`, `env-secret`) takes a value only when it is not a reference to
a secret by name (`projects/shop/deploy-key`, `settings.DATABASE_PASSWORD`) and its Shannon
entropy is at least 3.5 bits per byte (reference §4).

`Hit` spans are character offsets in the text scanned.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import string
from collections import Counter
from dataclasses import dataclass

from agents_site.vocabulary import SecretSeverity

CRITICAL, HIGH, MEDIUM = SecretSeverity.CRITICAL, SecretSeverity.HIGH, SecretSeverity.MEDIUM
GENERIC_MIN_ENTROPY = 3.5  # bits per byte (reference §4)
ENV_MIN_ENTROPY = 3.0  # bits per byte, for a value assigned to `<NAME>_API_KEY`, `<NAME>_TOKEN`…


@dataclass(frozen=True)
class Hit:
    """One credential found in a text: rule id, severity, `[start, end)` character span, the value."""

    rule: str
    severity: str
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class Rule:
    """A regex rule and what lets it run cheaply.

    `group` holds the secret. `literals`: strings one of which must be in the text for the rule
    to run at all (the regex starts with one, so `re` searches for it at C speed). `keywords`:
    lower-case words the regex starts at; the rule is tried only where one occurs (found with
    `str.find` in the lower-cased text) instead of at every position. `check`: a test the value
    must pass.
    """

    name: str
    severity: str
    regex: re.Pattern
    group: int = 0
    literals: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    check: object = None


def shannon_entropy(value: str) -> float:
    """Return the Shannon entropy of `value`'s UTF-8 bytes, in bits per byte."""
    data = value.encode()
    if not data:
        return 0.0
    counts = Counter(data)
    total = len(data)
    return -sum(c / total * math.log2(c / total) for c in counts.values())


# A value naming where a secret lives rather than being one: `projects/shop/deploy-key`,
# `settings.DATABASE_PASSWORD`, `os.environ.get`, `self.config.clientSecret`. A dotted name's
# parts must read as identifiers (snake_case, CONSTANT_CASE, or camelCase humps of a capital
# and lower-case letters): a random `R_wlMgyczxxhRy.vGRcyAeU5` is a secret, not a name.
_REFERENCE_PATH = re.compile(r"^[a-z0-9._-]+(?:/[a-z0-9._-]+)+$")
_IDENTIFIER = r"(?:[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*|[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+)"
_DOTTED_NAME = re.compile(rf"^{_IDENTIFIER}(?:\.{_IDENTIFIER})+$")


def keyword_value_is_secret(value: str) -> bool:
    """Return True when a value written after a keyword is a secret: not a name, entropy ≥ 3.5."""
    if _REFERENCE_PATH.fullmatch(value) or _DOTTED_NAME.fullmatch(value):
        return False
    return shannon_entropy(value) >= GENERIC_MIN_ENTROPY


def _basic_credentials(value: str) -> bool:
    """True when `value` is base64 of `user:password` (printable, a colon, a password of 6+)."""
    try:
        decoded = base64.b64decode(value, validate=True).decode()
    except (binascii.Error, ValueError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon) and decoded.isprintable() and len(password) >= 6


def _rx(pattern: str, flags: int = 0) -> re.Pattern:
    return re.compile(pattern, re.ASCII | flags)


def _word(prefix: str) -> str:
    """Return `prefix` as a regex that must start a word: the literal first (so `re` searches for it
    fast), then a look-behind that nothing word-like stands before it (what a leading `\\b` says)."""
    return rf"{prefix}(?<![A-Za-z0-9_]{prefix})"


def _spellings(*words: str) -> tuple[str, ...]:
    """Return each word with and without its underscores (`api_key` → `api_key`, `apikey`)."""
    return tuple(dict.fromkeys(w for word in words for w in (word, word.replace("_", ""))))


# The keywords after which a value is masked (`generic-secret`, `aws-secret-access-key`); the
# stream masker keeps them in its look-back (`sessions.masking`).
GENERIC_KEYWORDS = r"password|passwd|secret|api_?key|access_?token|auth_?token|client_?secret"
KEYWORD_END = re.compile(rf"(?i)(?:{GENERIC_KEYWORDS}|aws_?secret_?access_?key)\Z")

REFERENCE_RULES: tuple[Rule, ...] = (
    Rule("private-key", CRITICAL, _rx(  # the block ends at its END line; it never runs past the next BEGIN (linear time)
        r"-----BEGIN ((?:RSA |EC |OPENSSH |DSA |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?)-----"
        r"(?:(?:(?!-----BEGIN ).)*?-----END \1-----)?", re.DOTALL), literals=("-----BEGIN ",)),
    Rule("aws-access-key-id", CRITICAL, _rx(_word("A[KS]IA") + r"[0-9A-Z]{16}\b"), literals=("AKIA", "ASIA")),
    Rule("aws-secret-access-key", CRITICAL, _rx(r"(?i)aws_?secret_?access_?key[\"' ]*[:=][\"' ]*([A-Za-z0-9/+=]{40})"), 1,
         keywords=("aws",)),
    Rule("gcp-api-key", HIGH, _rx(_word("AIza") + r"[0-9A-Za-z_\-]{35}\b"), literals=("AIza",)),
    Rule("github-token", HIGH, _rx(_word("gh[pousr]_") + r"[A-Za-z0-9]{36,}\b"), literals=("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Rule("github-pat-fine", HIGH, _rx(_word("github_pat_") + r"[A-Za-z0-9_]{82}\b"), literals=("github_pat_",)),
    Rule("slack-token", HIGH, _rx(_word("xox[baprs]-") + r"[0-9A-Za-z\-]{10,}\b"), literals=("xox",)),
    Rule("stripe-secret-key", CRITICAL, _rx(_word("[sr]k_live_") + r"[0-9A-Za-z]{24,}\b"), literals=("_live_",)),
    Rule("npm-token", HIGH, _rx(_word("npm_") + r"[A-Za-z0-9]{36}\b"), literals=("npm_",)),
    Rule("slack-webhook", MEDIUM, _rx(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+"), literals=("hooks.slack.com",)),
    Rule("jwt", MEDIUM, _rx(_word("eyJ") + r"[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b"), literals=("eyJ",)),
    Rule("generic-secret", MEDIUM, _rx(
        rf"(?i)\b(?:{GENERIC_KEYWORDS})\b[\"' ]*[:=][\"' ]*[\"']?([A-Za-z0-9/+_\-.]{{16,}}={{0,2}})[\"']?"), 1,
        keywords=_spellings("password", "passwd", "secret", "api_key", "access_token", "auth_token", "client_secret"),
        check=keyword_value_is_secret),
)

PLATFORM_RULES: tuple[Rule, ...] = (
    Rule("api-key", CRITICAL, _rx(_word("ak_") + r"[0-9a-f]{48}\b"), literals=("ak_",)),  # tenancy.services: org API keys
    Rule("agent-token", CRITICAL, _rx(_word("agt_") + r"[a-z0-9][a-z0-9-]{0,62}_[0-9a-f]{16}_[0-9a-f]{48}\b"), literals=("agt_",)),
    Rule("webhook-secret", HIGH, _rx(_word("whsec_") + r"[A-Za-z0-9+/]{32,}={0,2}"), literals=("whsec_",)),
    Rule("claim-key", CRITICAL, _rx(_word("tgtk_") + r"[0-9a-f]{64}\b"), literals=("tgtk_",)),  # targets.keys: run-target claim keys
)

GAP_RULES: tuple[Rule, ...] = (
    Rule("gcp-oauth-client-secret", HIGH, _rx(_word("GOCSPX-") + r"[A-Za-z0-9_\-]{28}(?![A-Za-z0-9_\-])"), literals=("GOCSPX-",)),
    Rule("azure-ad-client-secret", HIGH, _rx(r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
         literals=("Q~",)),
    Rule("stripe-test-secret-key", HIGH, _rx(_word("[sr]k_test_") + r"[0-9A-Za-z]{24,}\b"), literals=("_test_",)),
    Rule("mailchimp-key", HIGH, _rx(r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"), literals=("-us",)),
    Rule("new-relic-user-key", HIGH, _rx(_word("NRAK-") + r"[A-Z0-9]{27}\b"), literals=("NRAK-",)),
    Rule("telegram-bot-token", HIGH, _rx(r"\b[0-9]{8,10}:AA[0-9A-Za-z_\-]{33}(?![0-9A-Za-z_\-])"), literals=(":AA",)),
    Rule("discord-bot-token", HIGH, _rx(r"\b[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}(?![A-Za-z0-9_\-])"),
         literals=(".",)),
    Rule("discord-webhook", HIGH, _rx(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/[A-Za-z0-9_\-]{60,68}"),
         literals=("/api/webhooks/",)),
    Rule("teams-webhook", HIGH, _rx(r"https://[a-z0-9\-]+\.webhook\.office\.com/webhook(?:b2)?/[0-9a-f\-]{36}@[0-9a-f\-]{36}/"
                                     r"IncomingWebhook/[0-9a-f]{32}/[0-9a-f\-]{36}"), literals=("webhook.office.com",)),
    Rule("planetscale-token", HIGH, _rx(_word("pscale_") + r"(?:tkn|pw|oauth)_[A-Za-z0-9_\-.=]{32,64}"), literals=("pscale_",)),
    Rule("basic-auth-credentials", HIGH, _rx(r"(?i)\bbasic ([A-Za-z0-9+/]{12,}={0,2})(?![A-Za-z0-9+/])"), 1, keywords=("basic ",),
         check=_basic_credentials),
    # issue 49: the nine formats neither set knew, and the two masked only in part
    Rule("mailgun-private-key", HIGH, _rx(_word("key-") + r"[0-9a-f]{32}\b"), literals=("key-",)),
    Rule("doppler-token", HIGH, _rx(r"(?<![A-Za-z0-9_.])dp\.(?:st|pt|ct|sa|scim|audit)\.(?:[a-z0-9_\-]{1,35}\.)?[A-Za-z0-9]{40,44}\b"),
         literals=("dp.",)),
    Rule("contentful-pat", HIGH, _rx(_word("CFPAT-") + r"[A-Za-z0-9_\-]{43,}"), literals=("CFPAT-",)),
    Rule("notion-integration-secret", HIGH, _rx(_word("secret_") + r"[A-Za-z0-9]{43}\b"), literals=("secret_",)),
    Rule("pinecone-api-key", HIGH, _rx(_word("pcsk_") + r"[A-Za-z0-9]{4,8}_[A-Za-z0-9]{50,80}\b"), literals=("pcsk_",)),
    Rule("tailscale-key", HIGH, _rx(_word("tskey-") + r"(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{6,24}-[A-Za-z0-9]{20,64}\b"),
         literals=("tskey-",)),
    Rule("mapbox-secret-token", HIGH, _rx(r"(?<![A-Za-z0-9_.])sk\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{20,}"), literals=("sk.eyJ",)),
    Rule("resend-api-key", HIGH, _rx(_word("re_") + r"[A-Za-z0-9]{8}_[A-Za-z0-9]{24}\b"), literals=("re_",)),
    Rule("fcm-server-key", HIGH, _rx(r"\bAAAA[A-Za-z0-9_\-]{7}:APA91b[A-Za-z0-9_\-]{100,}"), literals=(":APA91b",)),
    Rule("azure-sas-signature", HIGH, _rx(r"[?&;]sig=([A-Za-z0-9%+/=]{30,})"), 1, literals=("sig=",)),
    Rule("docker-hub-pat", HIGH, _rx(_word("dckr_pat_") + r"[A-Za-z0-9_\-]{26,}"), literals=("dckr_pat_",)),  # 27; a last `-` may read as a word end
    Rule("django-secret-key", HIGH, _rx(_word("django-insecure-") + r"[A-Za-z0-9!@#$%^&*(\-_=+)]{30,}"), literals=("django-insecure-",)),
    Rule("env-secret", MEDIUM, _rx(  # SECRET_KEY = '…', a quoted value: every character up to its closing quote
        r"(?<=[A-Z0-9])_(?:API_?KEY|AUTH_?TOKEN|ACCESS_?TOKEN|SECRET(?:_KEY)?|TOKEN|PASSWORD|PASSWD|KEY)[\"']?[ \t]*[:=][ \t]*(['\"])"
        r"([^'\"\s]{16,200})\1"), 2, literals=("_KEY", "_TOKEN", "_SECRET", "_PASSW", "_APIKEY"), check=lambda v: env_value_is_secret(v)),
    Rule("env-secret", MEDIUM, _rx(  # DD_API_KEY=…, TWILIO_AUTH_TOKEN="…": an upper-case name ending in what it holds
        r"(?<=[A-Z0-9])_(?:API_?KEY|AUTH_?TOKEN|ACCESS_?TOKEN|SECRET(?:_KEY)?|TOKEN|PASSWORD|PASSWD|KEY)[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"([A-Za-z0-9/+_\-.~]{16,}={0,2})(?![A-Za-z0-9/+_\-.~=])"), 1,
        literals=("_KEY", "_TOKEN", "_SECRET", "_PASSW", "_APIKEY"), check=lambda v: env_value_is_secret(v)),
)

RULES: tuple[Rule, ...] = REFERENCE_RULES + PLATFORM_RULES + GAP_RULES
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def env_value_is_secret(value: str) -> bool:
    """Return True when a value assigned to a variable named for a secret is one: not a name, and
    entropy ≥ 3.0 bits per byte (the name is strong evidence; 32 random hex digits can fall under 3.5)."""
    if _REFERENCE_PATH.fullmatch(value) or _DOTTED_NAME.fullmatch(value):
        return False
    return shannon_entropy(value) >= ENV_MIN_ENTROPY


def _keyword_matches(rule: Rule, text: str, lowered: str):
    """Yield the rule's matches starting at its keywords, left to right, none overlapping."""
    starts: set[int] = set()
    for keyword in rule.keywords:
        at = lowered.find(keyword)
        while at >= 0:
            starts.add(at)
            at = lowered.find(keyword, at + 1)
    reached = 0
    for at in sorted(starts):
        if at < reached:
            continue
        match = rule.regex.match(text, at)
        if match is not None:
            reached = match.end()
            yield match


def platform_hits(text: str, words: str | None = None) -> list[Hit]:
    """Return the hits of every rule of this module in `text` (reference, platform, gap rules).

    `words`: the copy of `text` the rules read (`sessions.scanner.word_ends`: as long, ASCII, marks
    that close a word made blanks); `text` itself when not given. Values are taken from `text`."""
    hits: list[Hit] = []
    source, text = text, (text if words is None else words)
    lowered = None
    for rule in RULES:
        if rule.keywords:
            if lowered is None:  # ASCII letters only: offsets stay those of `text`
                lowered = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
            matches = _keyword_matches(rule, text, lowered)
        elif rule.literals and not any(literal in text for literal in rule.literals):
            continue  # the cheap test: without one of its literals the rule cannot match
        else:
            matches = rule.regex.finditer(text)
        for match in matches:
            start, end = match.span(rule.group)
            value = source[start:end]
            if not value or (rule.check is not None and not rule.check(value)):
                continue
            hits.append(Hit(rule.name, rule.severity, start, end, value))
    return hits
