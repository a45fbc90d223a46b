"""The examples of the documentation pages: every shell and Python block, the answer it should print.

A page's fenced blocks are read in order (`blocks(path)`). Which are examples, and how the test
(`tests/docs/test_examples.py`) runs them, is in docs/about-these-docs.md:

- a block in `sh`/`bash`/`shell` or `python`/`py` is an example, run against a live `make demo`
  server; the page's shell examples run in one bash session, in order (`set -euo pipefail`);
- a block titled `answer` (```` ```json title="answer" ````) right after an example is what that
  example prints: whitespace is ignored and `…` matches any text;
- an example titled `illustrative: <why>` is not run (it needs a second machine, a replica
  service, a real model…); the test lists them and fails when they pass `MAX_ILLUSTRATIVE` of all;
- the example titled `server` is the command the test itself runs to start the server
  (`make demo`); its answer is compared with the server's banner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SHELL = {"sh", "bash", "shell"}
PYTHON = {"python", "py"}
#: The most illustrative examples may be, as a share of all examples of the site.
MAX_ILLUSTRATIVE = 0.10
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
TITLE = re.compile(r'title="([^"]*)"')


@dataclass
class Block:
    """One fenced block of a page."""

    page: str  # docs-relative path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str
    code: str
    answer: Block | None = field(default=None, repr=False)

    @property
    def is_example(self) -> bool:
        return self.lang in SHELL | PYTHON and self.title != "answer"

    @property
    def illustrative(self) -> bool:
        return self.is_example and self.title.startswith("illustrative")

    @property
    def is_server(self) -> bool:
        return self.is_example and self.title == "server"

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Return the fenced blocks of the Markdown page at `path`, answers attached to their examples."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    between: list[str] = []  # what stands between the previous block and this one
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            between.append(lines[i])
            i += 1
            continue
        indent, fence, info = match.group("indent"), match.group("fence"), match.group("info").strip()
        lang = info.split()[0].lower() if info and not info.startswith("{") else ""
        title = TITLE.search(info)
        body = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^{re.escape(indent)}{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        page = str(path.relative_to(DOCS)) if path.is_relative_to(DOCS) else str(path.relative_to(ROOT))
        block = Block(page=page, line=i + 1, lang=lang, title=title.group(1) if title else "",
                      code="\n".join(body) + "\n")
        if block.title == "answer" and found and found[-1].is_example and not any(s.strip() for s in between):
            found[-1].answer = block
        found.append(block)
        between = []
        i = j + 1
    return found


def pages() -> list[Path]:
    """Return every Markdown page of the site."""
    return sorted(DOCS.rglob("*.md"))


def examples(path: Path | None = None) -> list[Block]:
    """Return the examples of one page, or of the whole site."""
    return [b for p in ([path] if path else pages()) for b in blocks(p) if b.is_example]


def _pattern(expected: str) -> re.Pattern:
    parts = ["".join(part.split()) for part in expected.split("…")]
    return re.compile(".*?".join(re.escape(p) for p in parts), re.S)


def matches(expected: str, printed: str) -> bool:
    """Return whether `printed` is what `expected` shows: whitespace ignored, `…` standing for any text.

    Example: `{"status": "ok", …}` matches `{"status":"ok","output":"You said: hi"}`.
    """
    return _pattern(expected).fullmatch("".join(printed.split())) is not None
