"""Credential scanning of what callers write and what models and tools say (spec 003: POST …/events;
reference §4; issue 29 item 1).

Policy where a caller writes: refuse, never redact. `scan_payload(value)` returns findings; the
caller refuses the write with 422 `secret_in_transcript` when there is any (`sessions.services.
refuse_secrets`). Where the platform receives text it cannot refuse (a model's reply, a tool's
result), `redact_text` masks it. The raw value never leaves this module: a finding carries only a
masked preview and the SHA-256 fingerprint of the value.

Two rule sets, chosen by measurement (`bench/scanner.py`, BENCHMARKS.md "Credential scanner"):

* the maintained rule set of kingfisher (kingfisher-secret-scanner, pinned in requirements.txt):
  betterleaks' 460+ rules and Google's Veles rules, compiled for Vectorscan and run in Rust, in
  linear time, without the network. Every finding counts, the components kingfisher reports as
  invisible (an AWS secret key beside its key id) too. A rule's id is its own without the
  `betterleaks.`/`veles.secrets/` prefix (`openai-api-key`, `anthropic-api-key`);
* the platform's own rules (`sessions.secret_rules`): the reference's rules as §4 writes them,
  this platform's credentials (`ak_`, `agt_`, `whsec_`, `tgtk_`), and the formats the maintained
  set missed on the corpus.

The maintained rules were written for source files: most want a credential to end at a blank,
a quote or a semicolon. In a chat reply a credential is often followed by punctuation ("the key
is X."), so the engine reads a copy of the text in which a `.`, `,`, `;`, `!`, `?`, `)` or `]`
written before a blank (or at the end) is a blank: the same length in characters and in bytes,
so every span holds for the original text.

Overlapping hits keep the widest, then the platform's rule (so a GitHub token keeps the
reference's id `github-token` and a JWT its severity `medium`), then the most severe.

What is scanned: the payload's text content. A string payload is scanned as is; an object is
flattened to one `key: value` line per leaf (nested values indented below their key), so a
keyword sees its value and escaped newlines and quotes are decoded. `line` is the 1-based line
of that text where the secret starts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from dataclasses import dataclass
from functools import lru_cache

from agents_site.vocabulary import SecretSeverity
from sessions.secret_rules import RULES, Hit, platform_hits, shannon_entropy

logger = logging.getLogger(__name__)

__all__ = [
    "Finding", "Hit", "REDACTION", "REDACTION_PREFIX", "apply_spans", "fingerprint", "mask", "platform_hits", "raw_hits",
    "redact_json", "redact_text", "redaction_spans", "rejection_message", "rule_names", "scan_payload", "scan_text", "shannon_entropy",
]

CRITICAL, HIGH, MEDIUM = SecretSeverity.CRITICAL, SecretSeverity.HIGH, SecretSeverity.MEDIUM
#: What a masked credential becomes: its rule and the first 12 hex of its SHA-256 (never the value).
REDACTION = "[redacted:{rule}:{fingerprint}]"
REDACTION_PREFIX = "[redacted:"
_PLACEHOLDER = re.compile(r"\[redacted:[^\]\n]*\]")
_ENGINE_PREFIXES = ("betterleaks.", "kingfisher.", "veles.secrets/", "custom.")
_PLATFORM_FIRST, _ENGINE_SECOND = 0, 1


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


# --- the maintained rule set -------------------------------------------------------------------


class _Engine:
    """kingfisher's scanner, built once per process on first use (its rules load from a disk cache
    in ~0.5 s, compile in ~4 s the first time on a machine). Thread-safe: scans share it."""

    def __init__(self) -> None:
        self._scanner = None
        self._lock = threading.Lock()

    def scanner(self):
        if self._scanner is None:
            with self._lock:
                if self._scanner is None:
                    import kingfisher_sdk

                    self._scanner = kingfisher_sdk.Scanner(kingfisher_sdk.Rules())
        return self._scanner

    def hits(self, text: str, words: str | None = None) -> list[Hit]:
        """Return the maintained rules' hits in `text`, spans in characters of `text`.

        `words` is `word_ends(text)` when the caller has it. The engine reads that copy, then the
        tokens a mark closes that a rule reading the copy cannot see end (`_candidates`)."""
        words = word_ends(text) if words is None else words
        hits = self._found(text, words, 0)
        pieces = _candidates(text, words)
        if pieces:  # one more engine call over the candidates, one per line; spans mapped back
            joined, starts, at = [], [], 0
            for start, end in pieces:
                joined.append(words[start:end])
                starts.append((at, start))
                at += end - start + 1
            for hit in self._found(None, "\n".join(joined), 0):
                base, origin = next((b, o) for b, o in reversed(starts) if b <= hit.start)
                start, end = origin + hit.start - base, origin + hit.end - base
                hits.append(Hit(hit.rule, hit.severity, start, end, text[start:end]))
        return hits

    def _found(self, text: str | None, words: str, offset: int) -> list[Hit]:
        hits = []
        for found in self.scanner().scan(words.encode()):
            location = found.location
            start, end = location["start_offset"] + offset, location["end_offset"] + offset  # ASCII: bytes are characters
            value = (words if text is None else text)[start:end]
            if not value.strip():
                continue
            hits.append(Hit(rule_name(found.rule_id), _severity(found.rule_id, found.confidence), start, end, value))
        return hits

    def rule_ids(self) -> list[str]:
        """Return the ids of every maintained rule loaded."""
        return [rule["id"] for rule in self.scanner().rules.metadata()]


_ENGINE = _Engine()

# Marks that close a word when a blank, a line end or the text's end follows them (one `-`, never a
# PEM header's `-----`); `:`, `=` and `/` are not among them (`password: …` must keep its colon, a
# base64 secret may end in `/` or `=`), the tokens they close are read on their own (`_candidates`). Marks that never stand inside a credential are
# blanks wherever they are, and so is every non-ASCII character (no credential format uses one).
_CLOSING = re.compile(r"[.,;!?*%#~)\]\-]+(?=\s|\Z)")  # a run holding `--` is kept (a PEM line's `-----`)
_OPENING = re.compile(r"[*~.(\[]+(?=\S)")  # blanks only where a blank or the text's start stands before
_ALWAYS_BLANK = str.maketrans({mark: " " for mark in "|<>{}"})
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# A token a `:`/`=` closes (a JSON key flattened to `key: value`, `use KEY: here`), and a URL's
# user-info (`https://user:KEY@host`): read alone, so a rule that wants its own word end sees one.
# Every pattern starts with a literal or a character class, so `re` skips to its candidates in C
# (a pattern starting with a look-behind is tried at every position: 4 MiB took seconds).
_CLOSED_BY = re.compile(r"[:=/]+(?=\s|\Z)")  # `/` too: base64 ends in one (an AWS secret key), so it is no blank
_USER_INFO = re.compile(r"([^\s/:@]*)(?::([^\s/@]*))?@")
_HYPHEN_END = re.compile(r"-(?=[.,;!?*/%#~)\]]*(?:\s|\Z))")
_TOKEN_STOPS = frozenset(" \t\n\r\f\v\"'`([")
_LONGEST_TOKEN = 1024  # characters looked back for a token's start
_MIN_TOKEN = 16
_MAX_CANDIDATES_PER_KIB = 16


def word_ends(text: str) -> str:
    """Return the copy of `text` the rules read: ASCII, as long as `text`, marks closing a word made blanks.

    `"the key is X**."` → `"the key is X   "`; `"密钥是X。"` → `"   X "`. Spans in the copy are
    spans in `text` (characters; and bytes of the copy, which is ASCII)."""
    if not text.isascii():
        text = _NON_ASCII.sub(" ", text)
    text = text.translate(_ALWAYS_BLANK)
    text = _CLOSING.sub(lambda m: m.group() if "--" in m.group() else " " * len(m.group()), text)
    source = text
    return _OPENING.sub(lambda m: " " * len(m.group()) if m.start() == 0 or source[m.start() - 1].isspace() else m.group(), source)


def _token_start(text: str, end: int) -> int:
    """Return where the token ending at `end` starts (after a blank, a quote or an opening bracket)."""
    start, floor = end, max(0, end - _LONGEST_TOKEN)
    while start > floor and text[start - 1] not in _TOKEN_STOPS:
        start -= 1
    return start


def _candidates(text: str, words: str) -> list[tuple[int, int]]:
    """Return the spans of tokens read alone, at most 16 per KiB of text (bounded work): a token a `:`/`=`
    closes, a URL's user and password, a token ending in a `-` that may be the credential's own
    (`dckr_pat_…-` then a blank)."""
    limit = max(_MAX_CANDIDATES_PER_KIB, _MAX_CANDIDATES_PER_KIB * len(words) // 1024)
    spans: list[tuple[int, int]] = []
    if "-" in text:
        for match in _HYPHEN_END.finditer(text):
            end = match.end()
            if match.start() and (text[match.start() - 1].isalnum() or text[match.start() - 1] == "_"):
                start = _token_start(text, match.start())
                if end - start >= _MIN_TOKEN and text[start:end].isascii():
                    spans.append((start, end))
                    if len(spans) >= limit:
                        return spans
    if ":" in words or "=" in words or "/" in words:
        for match in _CLOSED_BY.finditer(words):
            start = _token_start(words, match.start())
            if match.start() - start >= _MIN_TOKEN:
                spans.append((start, match.start()))
                if len(spans) >= limit:
                    return spans
    at = words.find("://")
    while at >= 0 and len(spans) < limit:
        info = _USER_INFO.match(words, at + 3)
        if info is not None:
            for group in (1, 2):
                if info.group(group) and len(info.group(group)) >= _MIN_TOKEN:
                    spans.append(info.span(group))
        at = words.find("://", at + 3)
    return spans


def rule_name(engine_rule_id: str) -> str:
    """Return the finding's rule id for a maintained rule: its id without the engine's prefix.

    `rule_name("betterleaks.openai-api-key")` → `"openai-api-key"`,
    `rule_name("veles.secrets/grokxaiapikey")` → `"grokxaiapikey"`.
    """
    for prefix in _ENGINE_PREFIXES:
        if engine_rule_id.startswith(prefix):
            return engine_rule_id[len(prefix) :]
    return engine_rule_id


def _severity(engine_rule_id: str, confidence: str) -> str:
    if "private-key" in engine_rule_id or "aws" in engine_rule_id:
        return CRITICAL
    return HIGH if confidence == "high" else MEDIUM


def rule_names() -> set[str]:
    """Return every rule id a finding may carry (the platform's and the maintained set's)."""
    return {rule.name for rule in RULES} | {rule_name(r) for r in _ENGINE.rule_ids()}


def warm_up() -> None:
    """Load the maintained rules now (a process that is about to scan pays the load up front)."""
    _ENGINE.scanner()


# --- combining ---------------------------------------------------------------------------------


# Percent-encoded text (`postgresql%3A%2F%2Fapp%3Ap%40ss%40db…`) is decoded and read again, token by token.
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_PERCENT_STOPS = re.compile(r"[\s\"'<>&?=]")
_MAX_DECODED_PER_KIB = 4


def _direct_hits(text: str) -> list[Hit]:
    words = word_ends(text)
    return platform_hits(text, words) + _ENGINE.hits(text, words)


def _percent_runs(text: str, limit: int):
    """Yield `(start, end)` of each token of `text` holding 3+ percent escapes, at most `limit`."""
    reached = count = 0
    for match in _PERCENT.finditer(text):
        if match.start() < reached:
            continue
        start = match.start()
        while start > 0 and not _PERCENT_STOPS.match(text, start - 1) and match.start() - start < _LONGEST_TOKEN:
            start -= 1
        stop = _PERCENT_STOPS.search(text, match.end())
        end = stop.start() if stop is not None else len(text)
        reached = end
        if text.count("%", start, end) >= 3:
            yield start, end
            count += 1
            if count >= limit:
                return


def _decoded_hits(text: str) -> list[Hit]:
    """Return a hit over each percent-encoded token of `text` whose decoded form holds a credential.

    The engine decodes base64 itself; percent-encoding (a URL with user-info passed as a query
    value) is decoded here, at most 4 tokens per KiB of text (bounded work). The hit spans the whole
    encoded token and takes the rule of what its decoded form holds."""
    if text.count("%") < 3:
        return []
    from urllib.parse import unquote

    limit = max(_MAX_DECODED_PER_KIB, _MAX_DECODED_PER_KIB * len(text) // 1024)
    hits = []
    for start, end in _percent_runs(text, limit):
        encoded = text[start:end]
        decoded = unquote(encoded)
        inner = _direct_hits(decoded) if decoded != encoded else []
        if inner:
            worst = min(inner, key=lambda hit: SecretSeverity.RANK[hit.severity])
            hits.append(Hit(worst.rule, worst.severity, start, end, encoded))
    return hits


_CACHED_LENGTH = 16 * 1024  # characters: a text scanned twice (by its writer, then the storage guard) is read once


def _kept_hits(text: str) -> list[Hit]:
    """Return the hits in `text`, overlapping ones reduced to the widest (then the platform's rule, which
    keeps the reference's id and severity, then the most severe). Texts up to 16 KiB are remembered (the
    last 512): the storage guard reads again what a writer has just masked."""
    if len(text) <= _CACHED_LENGTH:
        return list(_cached_hits(text))
    return _scan_hits(text)


@lru_cache(maxsize=512)
def _cached_hits(text: str) -> tuple[Hit, ...]:
    return tuple(_scan_hits(text))


def _scan_hits(text: str) -> list[Hit]:
    words = word_ends(text)
    ranked = [(hit, _PLATFORM_FIRST) for hit in platform_hits(text, words)]
    ranked += [(hit, _ENGINE_SECOND) for hit in _ENGINE.hits(text, words) + _decoded_hits(text)]
    if REDACTION_PREFIX in text:  # a placeholder of an earlier masking is no credential, nor is any part of it
        placeholders = [m.span() for m in _PLACEHOLDER.finditer(text)]
        ranked = [(hit, source) for hit, source in ranked if not any(a < hit.end and hit.start < b for a, b in placeholders)]
    ranked.sort(key=lambda pair: (pair[0].start, -(pair[0].end - pair[0].start), pair[1], SecretSeverity.RANK[pair[0].severity]))
    kept: list[Hit] = []
    for hit, _ in ranked:
        if any(k.start <= hit.start and hit.end <= k.end for k in kept):
            continue
        kept.append(hit)
    return kept


def raw_hits(text: str) -> list[str]:
    """Return the raw values the scanner finds in `text` (for tests that grep for them afterwards)."""
    return [hit.value for hit in _kept_hits(text)]


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


def scan_text(text: str) -> list[Finding]:
    """Return the credentials found in `text`, most severe first (then line, then rule).

    Overlapping hits keep the widest (a PEM block over its header line); one value found by
    two rules at one place is reported once, under the more severe rule.
    """
    return _findings(text, _kept_hits(text))


def _findings(text: str, hits: list[Hit]) -> list[Finding]:
    findings: dict[tuple, Finding] = {}
    for hit in hits:
        line = text.count("\n", 0, hit.start) + 1
        finding = Finding(hit.rule, hit.severity, line, mask(hit.value), fingerprint(hit.value))
        findings.setdefault((finding.rule, finding.line, finding.fingerprint), finding)
    return sorted(findings.values(), key=lambda f: (SecretSeverity.RANK[f.severity], f.line, f.rule))




def redaction_spans(text: str) -> list[tuple[int, int, str]]:
    """Return where `redact_text` replaces credentials in `text`: `(start, end, replacement)`,
    sorted and non-overlapping (a hit overlapping an earlier one is skipped), spans in `text`."""
    return _spans(_kept_hits(text))


def _spans(hits: list[Hit]) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    cursor = 0
    for hit in sorted(hits, key=lambda h: h.start):
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
    hits = _kept_hits(text)
    if not hits:
        return text, []
    return apply_spans(text, _spans(hits)), _findings(text, hits)


def scan_payload(payload) -> list[Finding]:
    """Return the credentials found in a JSON-able `payload` (None → none). See module doc."""
    if payload is None:
        return []
    return scan_text("\n".join(_flatten(payload)))


def redact_json(value) -> tuple[object, list[Finding]]:
    """Return a JSON-able `value` with every credential masked in its strings, object keys too, and the findings.

    Read as `scan_payload` reads it (flattened `key: value` lines, so a keyword sees its value);
    each value found is replaced wherever it occurs. The result is the same JSON shape.
    Example: `{"sk-ant-api03-…": "prod"}` → `{"[redacted:anthropic-api-key:…]": "prod"}`.
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value, []
    text = "\n".join(_flatten(value))
    hits = _kept_hits(text)
    if not hits:
        return value, []
    document = json.dumps(value, ensure_ascii=False)
    for hit in sorted(hits, key=lambda h: len(h.value), reverse=True):
        placeholder = REDACTION.format(rule=hit.rule, fingerprint=fingerprint(hit.value)[:12])
        for piece in dict.fromkeys(part for part in hit.value.split("\n") if len(part.strip()) >= 4):  # a PEM block line by line
            document = document.replace(json.dumps(piece, ensure_ascii=False)[1:-1], placeholder)
    return json.loads(document), _findings(text, hits)


def rejection_message(findings: list[Finding]) -> str:
    """Return the 422 sentence naming every rule that fired and what to do instead.

    Example: `transcript rejected: 2 secret(s) detected (github-token, aws-access-key-id). …`.
    """
    rules = ", ".join(dict.fromkeys(f.rule for f in findings))
    return (
        f"transcript rejected: {len(findings)} secret(s) detected ({rules}). Nothing was stored. "
        "Never paste a credential: refer to it by name (a credential the operator granted to this "
        "org, e.g. a repository's push credential), and rotate the exposed value."
    )
