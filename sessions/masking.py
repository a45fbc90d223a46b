"""Credential masking of a reply while it streams (issue 11 item 4; beside `scanner.redact_text`).

A model's reply arrives in pieces. `StreamMasker` passes ordinary text on at once and holds
back only text that could still be, or be part of, a credential, until it resolves; the text it
lets out, joined, is exactly `redact_text(whole reply)[0]`. Nothing it has let out is ever
taken back, so it never lets out text whose masking could still change.

What is held back (every rule of `scanner` takes a token, a token after a keyword, or a PEM block):

* the word being written: text after the last whitespace. A credential is one run of
  non-blank characters (its keyword context, `password = …`, `aws_secret_access_key: …`, is
  not masked, only the value after it), so a word is released once whitespace follows it;
* a private key in progress: from a `-----BEGIN ` that is, or may still become, the header of a
  private key (`-----BEGIN RSA PRIVATE KEY-----`, any `BEGIN … PRIVATE KEY` the maintained rules
  know) until an `-----END …KEY-----` line arrives;
* a long run of separators after a keyword (`password` + 600 blanks + `= value`): only the
  first 128 go out before the value, so the keyword stays in the look-back that masks it.

Released text is masked with the hits of a look-back that starts at a line start at least 512
characters before it (a rule's context before its value may span lines: `password:\n  "…"`), or,
on a line longer than 4 KiB, at a blank at least 4 KiB back (a blank never falls inside a
credential, so the hits there are those of the whole reply). A reply that ends releases the rest.
`drop()` forgets what is held (a reply that broke off: a half-written credential must not be
recorded either).
"""

from __future__ import annotations

import logging
import re

from sessions.scanner import apply_spans, redact_text, redaction_spans
from sessions.secret_rules import KEYWORD_END

logger = logging.getLogger(__name__)

# A header that is, or may become, a private key's: `-----BEGIN` + up to 100 of `[ A-Z0-9_-]` +
# `PRIVATE KEY` (+ ` BLOCK`) + `-----` (the maintained rules' form; the platform's is inside it).
_PEM_OPEN = re.compile(r"-----BEGIN[ A-Z0-9_\-]{0,100}?PRIVATE KEY(?: BLOCK)?-----")
_PEM_PARTIAL = re.compile(r"-----BEGIN[ A-Z0-9_\-]{0,110}")  # a header still being written (to the end of the text)
_PEM_CLOSE = re.compile(r"-----END[ A-Z0-9_\-]{0,100}?KEY(?: BLOCK)?-----")
_LOOK_BACK = 512  # characters of whole lines read before the release point
_LONG_LINE = 4096  # on a longer line the look-back starts at a blank this far back
_SEPARATORS = "\"' :="
_KEYWORD_REACH = 128  # separators released after such a keyword (well inside the shortest look-back)


def _token_start(text: str, index: int, floor: int) -> int:
    """Return where the run of non-blank characters holding `text[index]` starts (≥ `floor`)."""
    while index > floor and not text[index - 1].isspace():
        index -= 1
    return index


def _pem_pending(text: str, begin: int) -> bool:
    """Return True when the `-----BEGIN` at `begin` may still be, or is, a private key not yet resolved.

    Resolved: the header cannot become one (`-----BEGIN CERTIFICATE-----` and its line break), or
    the block has its `-----END …KEY-----` line.
    """
    rest = text[begin : begin + 160]
    opened = _PEM_OPEN.match(rest)
    if opened is None:
        return bool(_PEM_PARTIAL.fullmatch(text, begin))
    after = begin + opened.end()
    close = _PEM_CLOSE.search(text, after)
    return close is None


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
        index = text.find("-----BEGIN", cut)
        while 0 <= index < cut_at:
            if _pem_pending(text, index):
                cut_at = min(cut_at, _token_start(text, index, cut))
                break
            index = text.find("-----BEGIN", index + 1)
        return self._keyword_hold(cut_at)

    def _keyword_hold(self, cut_at: int) -> int:
        """Return `cut_at`, or less while a keyword (`password`, `aws_secret_access_key`…) is
        followed by nothing but separators up to it: at most `_KEYWORD_REACH` of them go out, so
        the keyword stays inside the look-back of the release holding its value (a long run of
        blanks on a long line would otherwise push it out, and the value would stream raw)."""
        text, cut = self._text, self._cut
        line_start = text.rfind("\n", 0, cut_at) + 1
        look = max(line_start, cut - _LOOK_BACK)
        head = text[look:cut_at].rstrip(_SEPARATORS)
        keyword_end = look + len(head)
        if keyword_end < cut_at and KEYWORD_END.search(head[-32:]):
            return min(cut_at, max(cut, keyword_end + _KEYWORD_REACH))
        return cut_at

    def _context_start(self, cut: int) -> int:
        """Return where the look-back of a release starting at `cut` begins (see module doc)."""
        text = self._text
        line_start = text.rfind("\n", 0, max(cut - _LOOK_BACK, 0)) + 1
        if cut - line_start <= _LONG_LINE:
            return line_start
        blank = cut - _LONG_LINE
        while blank > line_start and not text[blank - 1].isspace():
            blank -= 1
        return blank

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
