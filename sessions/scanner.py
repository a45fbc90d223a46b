"""Credential scanning of transcript payloads (spec 003: POST …/events; reference §4).

Policy: refuse, never redact. `scan_payload(value)` returns findings; the caller refuses the
write with 422 `secret_in_transcript` when there is any. The raw value never leaves this
module: a finding carries only a masked preview and the SHA-256 fingerprint of the value.

Detectors: the maintained rule set of detect-secrets (pinned in requirements.txt), a curated
subset of its plugins, plus the reference's rules it lacks or gets wrong:

* `private-key` — the whole PEM block (its fingerprint matches the key, not the header every
  key shares); detect-secrets only sees the `BEGIN … PRIVATE KEY` header.
* `aws-secret-access-key` — unquoted `aws_secret_access_key = …` (detect-secrets needs quotes).
* `gcp-api-key`, `github-pat-fine`, `npm-token` — absent from detect-secrets.
* `stripe-secret-key` — detect-secrets cuts the key at 24 characters.
* `github-token`, `slack-token`, `slack-webhook`, `jwt` — detect-secrets has them in narrower
  shapes (a 36-character GitHub token, Slack tokens with numeric parts, webhooks of the
  `T…/B…/…` form, JWTs whose parts decode as JSON); the reference's patterns catch the rest.
* `agent-token`, `webhook-secret` — this platform's own credentials (identity agents' `agt_…`
  tokens, Standard Webhooks `whsec_…` secrets).
* `generic-secret` — `password|secret|api_key|… = <value>` gated on Shannon entropy ≥ 3.5
  bits/char (detect-secrets' keyword plugin flags any value, e.g. `password = changeme`).

Every reference rule is applied as the reference writes it, so whatever §4 catches is caught
here; detect-secrets adds the services the reference does not name.

Left out on purpose: detect-secrets' high-entropy-string plugins (they flag hashes and UUIDs,
which transcripts are full of), its keyword plugin (replaced by `generic-secret`), the public-IP
plugin (not a credential), the Artifactory plugin (it matches upper-case words such as
`APACHECONFIG`), and the IBM Cloud IAM, IBM COS HMAC, Cloudant and SoftLayer plugins: their
assignment regexes backtrack cubically on a run of spaces (a 64 KiB payload would hold a
worker for days), and the IAM one flags any `key: <44 characters>`. A reference to a secret by
name (`kms://…`, `projects/shop/deploy-key`) is not a secret and is admitted.

The library sees each line in windows of 1024 characters overlapping by 256 (its regexes are
quadratic on long runs such as `://://…` or `eyJeyJ…`); a token longer than the overlap that a
window cuts is still caught whole by the reference rules, which read the full text.

What is scanned: the payload's text content. A string payload is scanned as is; an object is
flattened to one `key: value` line per leaf (nested values indented below their key), so a
keyword sees its value and escaped newlines and quotes are decoded. `line` is the 1-based line
of that text where the secret starts.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from detect_secrets.plugins import aws, azure_storage_key, basic_auth, discord, github_token, gitlab_token, jwt
from detect_secrets.plugins import mailchimp, npm, openai, private_key, pypi_token, sendgrid, slack, square_oauth
from detect_secrets.plugins import stripe, telegram_token, twilio

from agents_site.vocabulary import SecretSeverity

CRITICAL, HIGH, MEDIUM = SecretSeverity.CRITICAL, SecretSeverity.HIGH, SecretSeverity.MEDIUM
GENERIC_MIN_ENTROPY = 3.5  # bits per byte (reference §4)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-+/=.]*")
LIBRARY_WINDOW = 1024  # characters of one line the library's regexes see at once
LIBRARY_OVERLAP = 256  # consecutive windows share this much, so a shorter token is seen whole


@dataclass(frozen=True)
class Finding:
    """One credential found: rule id, severity, 1-based line, masked preview, SHA-256 hex."""

    rule: str
    severity: str
    line: int
    preview: str
    fingerprint: str

    def as_dict(self) -> dict:
        """Return the wire form `{rule, severity, line, preview, fingerprint}`."""
        return {"rule": self.rule, "severity": str(self.severity), "line": self.line, "preview": self.preview, "fingerprint": self.fingerprint}


@dataclass(frozen=True)
class _Hit:
    rule: str
    severity: str
    start: int
    end: int
    value: str


def mask(value: str) -> str:
    """Return `value` with all but its first and last 4 characters starred.

    Values of 8 characters or fewer are starred entirely: `mask("AKIAABCDEFGHIJKLMNOP")` →
    `"AKIA************MNOP"`, `mask("hunter2")` → `"*******"`.
    """
    if len(value) <= 8:
        return "*" * len(value)
    return value[:4] + "*" * (len(value) - 8) + value[-4:]


def fingerprint(value: str) -> str:
    """Return the lowercase SHA-256 hex of the UTF-8 bytes of `value`."""
    return hashlib.sha256(value.encode()).hexdigest()


def shannon_entropy(value: str) -> float:
    """Return the Shannon entropy of `value`'s UTF-8 bytes, in bits per byte."""
    data = value.encode()
    if not data:
        return 0.0
    counts = Counter(data)
    total = len(data)
    return -sum(c / total * math.log2(c / total) for c in counts.values())


# --- the reference's rules (regex, severity, group holding the secret, extra check) -------

_REFERENCE_RULES: list[tuple[str, str, re.Pattern, int]] = [
    (
        "private-key",
        CRITICAL,
        re.compile(  # the block ends at its END line; it never runs past the next BEGIN (linear time)
            r"-----BEGIN ((?:RSA |EC |OPENSSH |DSA |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:(?:(?!-----BEGIN ).)*?-----END \1-----)?",
            re.DOTALL,
        ),
        0,
    ),
    ("aws-secret-access-key", CRITICAL, re.compile(r"(?i)aws_?secret_?access_?key[\"' ]*[:=][\"' ]*([A-Za-z0-9/+=]{40})", re.ASCII), 1),
    ("gcp-api-key", HIGH, re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b", re.ASCII), 0),
    ("github-token", HIGH, re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b", re.ASCII), 0),
    ("github-pat-fine", HIGH, re.compile(r"\bgithub_pat_[A-Za-z0-9_]{82}\b", re.ASCII), 0),
    ("slack-token", HIGH, re.compile(r"\bxox[baprs]-[0-9A-Za-z\-]{10,}\b", re.ASCII), 0),
    ("stripe-secret-key", CRITICAL, re.compile(r"\b(?:sk|rk)_live_[0-9A-Za-z]{24,}\b", re.ASCII), 0),
    ("npm-token", HIGH, re.compile(r"\bnpm_[A-Za-z0-9]{36}\b", re.ASCII), 0),
    ("agent-token", CRITICAL, re.compile(r"\bagt_[a-z0-9][a-z0-9-]{0,62}_[0-9a-f]{16}_[0-9a-f]{48}\b", re.ASCII), 0),
    ("webhook-secret", HIGH, re.compile(r"\bwhsec_[A-Za-z0-9+/]{32,}={0,2}", re.ASCII), 0),
    ("slack-webhook", MEDIUM, re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9_/]+", re.ASCII), 0),
    ("jwt", MEDIUM, re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b", re.ASCII), 0),
    (
        "generic-secret",
        MEDIUM,
        re.compile(
            r"(?i)\b(?:password|passwd|secret|api_?key|access_?token|auth_?token|client_?secret)\b"
            r"[\"' ]*[:=][\"' ]*[\"']?([A-Za-z0-9/+_\-.]{16,}={0,2})[\"']?",
            re.ASCII,
        ),
        1,
    ),
]

# A value naming where a secret lives rather than being one: `projects/shop/deploy-key`,
# `settings.DATABASE_PASSWORD`, `os.environ.get`, `self.config.clientSecret`. A dotted name's
# parts must read as identifiers (snake_case, CONSTANT_CASE, or camelCase humps of a capital
# and lower-case letters): a random `R_wlMgyczxxhRy.vGRcyAeU5` is a secret, not a name.
_REFERENCE_PATH = re.compile(r"^[a-z0-9._-]+(?:/[a-z0-9._-]+)+$")
_IDENTIFIER = r"(?:[a-z_][a-z0-9_]*|[A-Z_][A-Z0-9_]*|[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+)"
_DOTTED_NAME = re.compile(rf"^{_IDENTIFIER}(?:\.{_IDENTIFIER})+$")


def _generic_is_secret(value: str) -> bool:
    if _REFERENCE_PATH.fullmatch(value) or _DOTTED_NAME.fullmatch(value):
        return False
    return shannon_entropy(value) >= GENERIC_MIN_ENTROPY


# --- detect-secrets plugins: (plugin, rule id per denylist regex, severity) ----------------


@dataclass(frozen=True)
class _Plugin:
    detector: object
    rules: tuple[tuple[str, str], ...]  # (rule id, severity) per denylist regex; last repeats
    whole_match: bool = False  # the regex's group is not the secret (GitHub's is the prefix)
    extend: bool = False  # the regex stops short of the token's end (JWT, Stripe)
    validate: object = None  # extra library check on the value (JWT's formal validity)

    def rule_for(self, index: int) -> tuple[str, str]:
        return self.rules[min(index, len(self.rules) - 1)]


@lru_cache(maxsize=1)
def _plugins() -> tuple[_Plugin, ...]:
    jwt_detector = jwt.JwtTokenDetector()
    return (
        _Plugin(aws.AWSKeyDetector(), (("aws-access-key-id", CRITICAL), ("aws-secret-access-key", CRITICAL))),
        _Plugin(azure_storage_key.AzureStorageKeyDetector(), (("azure-storage-key", CRITICAL),)),
        _Plugin(basic_auth.BasicAuthDetector(), (("basic-auth-credentials", HIGH),)),
        _Plugin(discord.DiscordBotTokenDetector(), (("discord-bot-token", HIGH),)),
        _Plugin(github_token.GitHubTokenDetector(), (("github-token", HIGH),), whole_match=True),
        _Plugin(gitlab_token.GitLabTokenDetector(), (("gitlab-token", HIGH),)),
        _Plugin(jwt_detector, (("jwt", MEDIUM),), extend=True, validate=jwt_detector.is_formally_valid),
        _Plugin(mailchimp.MailchimpDetector(), (("mailchimp-key", HIGH),)),
        _Plugin(npm.NpmDetector(), (("npm-token", HIGH),)),
        _Plugin(openai.OpenAIDetector(), (("openai-key", HIGH),)),
        _Plugin(private_key.PrivateKeyDetector(), (("private-key", CRITICAL),)),
        _Plugin(pypi_token.PypiTokenDetector(), (("pypi-token", HIGH),)),
        _Plugin(sendgrid.SendGridDetector(), (("sendgrid-key", HIGH),)),
        _Plugin(slack.SlackDetector(), (("slack-token", HIGH), ("slack-webhook", MEDIUM))),
        _Plugin(square_oauth.SquareOAuthDetector(), (("square-oauth-secret", HIGH),)),
        _Plugin(stripe.StripeDetector(), (("stripe-secret-key", CRITICAL),), extend=True),
        _Plugin(telegram_token.TelegramBotTokenDetector(), (("telegram-bot-token", HIGH),)),
        _Plugin(twilio.TwilioKeyDetector(), (("twilio-key", HIGH),)),
    )


def _secret_span(match: re.Match, *, whole: bool) -> tuple[int, int]:
    if whole or not match.re.groups:
        return match.span()
    for index in range(match.re.groups, 0, -1):
        if match.group(index):
            return match.span(index)
    return match.span()


def _windows(line: str):
    """Yield `(begin, text)`: `line` cut in `LIBRARY_WINDOW`-character pieces overlapping by `LIBRARY_OVERLAP`."""
    begin = 0
    while True:
        yield begin, line[begin : begin + LIBRARY_WINDOW]
        if begin + LIBRARY_WINDOW >= len(line):
            return
        begin += LIBRARY_WINDOW - LIBRARY_OVERLAP


def _library_hits(text: str) -> list[_Hit]:
    hits: list[_Hit] = []
    offset = 0
    for line in text.split("\n"):
        if line.strip():  # a blank line holds nothing; 64 Ki of them cost seconds of plugin calls
            for begin, window in _windows(line):
                hits.extend(_window_hits(line, begin, window, offset))
        offset += len(line) + 1
    return hits


def _window_hits(line: str, begin: int, window: str, offset: int) -> list[_Hit]:
    """Return the library's hits in `window` (= `line[begin:…]`), spans in `text` coordinates."""
    hits: list[_Hit] = []
    for plugin in _plugins():
        if not any(True for _ in plugin.detector.analyze_string(window)):
            continue  # the library's own verdict gates the window
        for index, regex in enumerate(plugin.detector.denylist):
            rule, severity = plugin.rule_for(index)
            for match in regex.finditer(window):
                start, end = _secret_span(match, whole=plugin.whole_match)
                start, end = begin + start, begin + end
                if plugin.extend:  # on the whole line: a window may have cut the token
                    end = start + len(_TOKEN_TAIL.match(line, start).group())
                value = line[start:end]
                if not value or (plugin.validate is not None and not plugin.validate(value)):
                    continue
                hits.append(_Hit(rule, severity, offset + start, offset + end, value))
    return hits


def _reference_hits(text: str) -> list[_Hit]:
    hits: list[_Hit] = []
    for rule, severity, regex, group in _REFERENCE_RULES:
        for match in regex.finditer(text):
            start, end = match.span(group)
            value = text[start:end]
            if rule == "generic-secret" and not _generic_is_secret(value):
                continue
            hits.append(_Hit(rule, severity, start, end, value))
    return hits


def _flatten(value) -> list[str]:
    """Return the text lines of a JSON value: strings as they are, objects as `key: value`.

    Nested values are indented below their key. Iterative, so a payload nested deeper than
    Python's stack is still read whole: `{"a": {"b": "x"}}` → `["a:", "  b: x"]`.
    """
    lines: list[str] = []
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, indent = stack.pop()
        if isinstance(item, str):
            lines.append(item)
        elif isinstance(item, dict):
            pending: list[tuple[object, str]] = []
            for key, child in item.items():
                if isinstance(child, (dict, list)):
                    pending.append((f"{indent}{key}:", ""))
                    pending.append((child, indent + "  "))
                else:
                    pending.append((f"{indent}{key}: {child}", ""))
            stack.extend(reversed(pending))
        elif isinstance(item, list):
            stack.extend(reversed([(c, indent) if isinstance(c, (dict, list, str)) else (f"{indent}{c}", "") for c in item]))
        elif item is not None:
            lines.append(str(item))
    return lines


def _kept_hits(text: str) -> list[_Hit]:
    """Return the hits in `text`, overlapping ones reduced to the widest (then most severe)."""
    hits = _reference_hits(text) + _library_hits(text)
    hits.sort(key=lambda h: (h.start, -(h.end - h.start), SecretSeverity.RANK[h.severity]))
    kept: list[_Hit] = []
    for hit in hits:
        if any(k.start <= hit.start and hit.end <= k.end for k in kept):
            continue
        kept.append(hit)
    return kept


def scan_text(text: str) -> list[Finding]:
    """Return the credentials found in `text`, most severe first (then line, then rule).

    Overlapping hits keep the widest (a PEM block over its header line); one value found by
    two rules at one place is reported once, under the more severe rule.
    """
    findings: dict[tuple, Finding] = {}
    for hit in _kept_hits(text):
        line = text.count("\n", 0, hit.start) + 1
        finding = Finding(hit.rule, hit.severity, line, mask(hit.value), fingerprint(hit.value))
        findings.setdefault((finding.rule, finding.line, finding.fingerprint), finding)
    return sorted(findings.values(), key=lambda f: (SecretSeverity.RANK[f.severity], f.line, f.rule))


#: What a masked credential becomes: its rule and the first 12 hex of its SHA-256 (never the value).
REDACTION = "[redacted:{rule}:{fingerprint}]"
REDACTION_PREFIX = "[redacted:"


def redaction_spans(text: str) -> list[tuple[int, int, str]]:
    """Return where `redact_text` replaces credentials in `text`: `(start, end, replacement)`,
    sorted and non-overlapping (a hit overlapping an earlier one is skipped), spans in `text`."""
    spans: list[tuple[int, int, str]] = []
    cursor = 0
    for hit in sorted(_kept_hits(text), key=lambda h: h.start):
        if hit.start < cursor:
            continue
        spans.append((hit.start, hit.end, REDACTION.format(rule=hit.rule, fingerprint=fingerprint(hit.value)[:12])))
        cursor = hit.end
    return spans


def apply_spans(text: str, spans: list[tuple[int, int, str]], begin: int = 0, end: int | None = None) -> str:
    """Return `text[begin:end]` with the `spans` (from `redaction_spans`) inside it replaced.

    A span must lie wholly inside or wholly outside `[begin, end)` (the stream masker's cuts
    guarantee it)."""
    end = len(text) if end is None else end
    pieces, cursor = [], begin
    for start, stop, replacement in spans:
        if stop <= begin or start >= end:
            continue
        pieces.append(text[cursor:start])
        pieces.append(replacement)
        cursor = stop
    pieces.append(text[cursor:end])
    return "".join(pieces)


def redact_text(text: str) -> tuple[str, list[Finding]]:
    """Return `text` with every credential replaced by `[redacted:<rule>:<fingerprint>]`, and the findings.

    Used where a credential arrives from a source that cannot be refused (a model's reply, a
    tool's result): the turn is kept, the value never is. `<fingerprint>` is the first 12 hex
    of the value's SHA-256, so the same value is recognisable across turns. Example:
    `"key ghp_abc…"` → `"key [redacted:github-token:3f2a…]"`. A reply streamed as it is
    written is masked piece by piece by `sessions.masking.StreamMasker`, to the same result.
    """
    if not text:
        return text or "", []
    spans = redaction_spans(text)
    if not spans:
        return text, []
    return apply_spans(text, spans), scan_text(text)


def scan_payload(payload) -> list[Finding]:
    """Return the credentials found in a JSON-able `payload` (None → none). See module doc."""
    if payload is None:
        return []
    return scan_text("\n".join(_flatten(payload)))


def rejection_message(findings: list[Finding]) -> str:
    """Return the 422 sentence naming every rule that fired and what to do instead.

    Example: `transcript rejected: 2 secret(s) detected (github-token, aws-access-key). …`.
    """
    rules = ", ".join(dict.fromkeys(f.rule for f in findings))
    return (
        f"transcript rejected: {len(findings)} secret(s) detected ({rules}). Nothing was stored. "
        "Never paste a credential: refer to it by name (a credential the operator granted to this "
        "org, e.g. a repository's push credential), and rotate the exposed value."
    )
