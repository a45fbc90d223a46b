"""Credential masking of a reply while it streams (issue 11 item 4; beside `scanner.redact_text`).

A model's reply arrives in pieces. `StreamMasker` passes ordinary text on at once and holds
back only text that could still be, or be part of, a credential, until it resolves; the text it
lets out, joined, is exactly `redact_text(whole reply)[0]`. Nothing it has let out is ever
taken back, so it never lets out text whose masking could still change.

What is held back (every rule of `scanner` is a token, a keyword and a token, or a PEM block):

* the word being written: text after the last whitespace. A credential is one run of
  non-blank characters (its keyword context, `password = …`, `aws_secret_access_key: …`, is
  not masked, only the value after it), so a word is released once whitespace follows it;
* a private key in progress: from a `BEGIN` that is, or may still become, the header of a
  private key (`-----BEGIN RSA PRIVATE KEY-----`, the library's `BEGIN … PRIVATE KEY`) until its
  `-----END …-----` line arrives (or another `-----BEGIN ` shows the block has no end);
* an npm registry line (`//host/:_authToken=…`): its token rule takes the rest of the line, so
  the rest of that line is held until the line ends;
* a long run of separators after a keyword (`password` + 600 blanks + `= value`): only the
  first 128 go out before the value, so the keyword stays in the look-back that masks it.

Released text is masked with the hits of the whole line it belongs to (a keyword written
earlier still counts). For very long lines the look-back is the 1024+ characters before the
release point, aligned with the scanner's windows. A reply that ends releases the rest.
`drop()` forgets what is held (a reply that broke off: a half-written credential must not be
recorded either).
"""

from __future__ import annotations

import logging
import re

from sessions.scanner import LIBRARY_OVERLAP, LIBRARY_WINDOW, apply_spans, redact_text, redaction_spans

logger = logging.getLogger(__name__)

_KEY_TYPES = ("", "RSA ", "EC ", "OPENSSH ", "DSA ", "PGP ", "ENCRYPTED ")
# The reference rule's headers (after the leading dashes) and the library's (detect-secrets).
_PEM_HEADERS = tuple(f"BEGIN {kind}PRIVATE KEY{block}-----" for kind in _KEY_TYPES for block in ("", " BLOCK"))
_LIBRARY_HEADERS = (
    "BEGIN DSA PRIVATE KEY", "BEGIN EC PRIVATE KEY", "BEGIN OPENSSH PRIVATE KEY", "BEGIN PGP PRIVATE KEY BLOCK",
    "BEGIN PRIVATE KEY", "BEGIN RSA PRIVATE KEY", "BEGIN SSH2 ENCRYPTED PRIVATE KEY",
)
_NPM_MARK = ":_authToken="
_LOOK_BACK = LIBRARY_WINDOW  # characters of a long line read before the release point
_LOOK_BACK_MIN = LIBRARY_OVERLAP  # a long line's look-back is never shorter than this
# The keywords of the rules that mask a value written after them (`generic-secret`,
# `aws-secret-access-key`) and what may stand between keyword and value (`password  =  "…`).
_KEYWORD_END = re.compile(r"(?i)(?:password|passwd|secret|api_?key|access_?token|auth_?token|client_?secret|"
                          r"aws_?secret_?access_?key)\Z")
_SEPARATORS = "\"' :="
_KEYWORD_REACH = 128  # separators released after such a keyword (well inside the shortest look-back)
_WINDOW_STEP = LIBRARY_WINDOW - LIBRARY_OVERLAP


def _token_start(text: str, index: int, floor: int) -> int:
    """Return where the run of non-blank characters holding `text[index]` starts (≥ `floor`)."""
    while index > floor and not text[index - 1].isspace():
        index -= 1
    return index


def _pem_pending(text: str, begin: int) -> bool:
    """Return True when the `BEGIN` at `begin` may still be, or is, a private key not yet resolved.

    Resolved: the header cannot become one (`BEGIN CERTIFICATE`), or a whole header's block has
    its `-----END <type>-----` or is followed by another `-----BEGIN ` (the block then ends at
    its header). A library header (`BEGIN RSA PRIVATE KEY`, no dashes) is pending only while
    it is being written.
    """
    rest = text[begin:]
    if any(len(rest) < len(h) and h.startswith(rest) for h in _LIBRARY_HEADERS):
        return True
    if text[max(begin - 5, 0) : begin] != "-----":
        return False
    for header in _PEM_HEADERS:
        if len(rest) < len(header) and header.startswith(rest):
            return True
        if rest.startswith(header):
            kind = header[len("BEGIN ") : -len("-----")]
            after = begin + len(header)
            end = text.find(f"-----END {kind}-----", after)
            again = text.find("-----BEGIN ", after)
            return end < 0 and again < 0
    return False


class StreamMasker:
    """Mask a reply piece by piece: `feed(piece)` returns what may be sent now, `finish()` the rest.

    The returned pieces concatenate to `redact_text(reply)[0]` for the reply the fed pieces make.
    `emitted` is what has been returned so far. Not thread-safe (one reply, one writer).
    """

    def __init__(self) -> None:
        self._text = ""
        self._cut = 0  # raw text before this index has been released
        self._sent: list[str] = []
        self._dropped = False

    @property
    def emitted(self) -> str:
        """Return the masked text released so far."""
        return "".join(self._sent)

    @property
    def held(self) -> int:
        """Return how many raw characters are held back."""
        return len(self._text) - self._cut

    def feed(self, piece: str) -> str:
        """Take the next raw piece of the reply; return the masked text that may be sent now ("" if none)."""
        if not piece or self._dropped:
            return ""
        self._text += piece
        if not any(c.isspace() for c in piece):  # no word ended: nothing new can be released
            return ""
        return self._release(self._safe_cut())

    def finish(self) -> str:
        """The reply is complete: return the rest, masked. Joined with what `feed` returned, it is
        exactly `redact_text(reply)[0]`. After `drop()`, nothing."""
        if self._dropped:
            return ""
        whole = redact_text(self._text)[0]
        sent = self.emitted
        if whole.startswith(sent):
            rest = whole[len(sent) :]
        else:  # never expected: the cuts guarantee a prefix; release the tail as masked alone
            logger.error("stream masker: released text is not a prefix of the masked reply")
            rest = self._masked(self._cut, len(self._text))
        self._cut = len(self._text)
        if rest:
            self._sent.append(rest)
        return rest

    def drop(self) -> None:
        """Forget the held-back text (the reply broke off); `emitted` stays what was sent."""
        self._cut = len(self._text)
        self._dropped = True

    # -- where to cut ---------------------------------------------------------------------
    def _safe_cut(self) -> int:
        text, cut = self._text, self._cut
        cut_at = len(text)
        while cut_at > cut and not text[cut_at - 1].isspace():  # the word being written
            cut_at -= 1
        if cut_at <= cut:
            return cut
        index = text.find("BEGIN", cut)
        while 0 <= index < cut_at:
            if _pem_pending(text, index):
                cut_at = min(cut_at, _token_start(text, index, cut))
                break
            index = text.find("BEGIN", index + 1)
        cut_at = self._keyword_hold(cut_at)
        line_start = text.rfind("\n") + 1
        mark = text.find(_NPM_MARK, max(line_start, cut))
        if mark >= 0:
            cut_at = min(cut_at, _token_start(text, mark, cut))
        return cut_at

    def _keyword_hold(self, cut_at: int) -> int:
        """Return `cut_at`, or less while a keyword (`password`, `aws_secret_access_key`…) is
        followed by nothing but separators up to it: at most `_KEYWORD_REACH` of them go out, so
        the keyword stays inside the look-back of the release holding its value (a long run of
        blanks on a long line would otherwise push it out, and the value would stream raw)."""
        text, cut = self._text, self._cut
        line_start = text.rfind("\n", 0, cut_at) + 1
        look = max(line_start, cut - _LOOK_BACK_MIN)
        head = text[look:cut_at].rstrip(_SEPARATORS)
        keyword_end = look + len(head)
        if keyword_end < cut_at and _KEYWORD_END.search(head[-32:]):
            return min(cut_at, max(cut, keyword_end + _KEYWORD_REACH))
        return cut_at

    def _context_start(self, cut: int) -> int:
        line_start = self._text.rfind("\n", 0, cut) + 1
        if cut - line_start <= _LOOK_BACK:
            return line_start
        steps = (cut - line_start - _LOOK_BACK) // _WINDOW_STEP + 1
        return line_start + steps * _WINDOW_STEP  # aligned with the scanner's windows on this line

    def _masked(self, begin: int, end: int) -> str:
        start = self._context_start(begin)
        spans = [(a + start, b + start, r) for a, b, r in redaction_spans(self._text[start:])]
        return apply_spans(self._text, spans, begin, end)

    def _release(self, cut_at: int) -> str:
        if cut_at <= self._cut:
            return ""
        start = self._context_start(self._cut)
        spans = [(a + start, b + start, r) for a, b, r in redaction_spans(self._text[start:])]
        for a, b, _ in spans:  # a hit already visible across the cut (a PEM block's END line)
            if a < cut_at < b:
                cut_at = a
                break
        if cut_at <= self._cut:
            return ""
        out = apply_spans(self._text, spans, self._cut, cut_at)
        self._cut = cut_at
        if out:
            self._sent.append(out)
        return out
