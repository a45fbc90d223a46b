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
  (`make demo`); its answer is compared with the server's banner;
- a block titled `excerpt: <path>` is a piece of the project's code, not an example: every one of
  its lines must be found in that file, in order (`excerpt_problems`), so it cannot drift either.
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
    def excerpt_of(self) -> str | None:
        """Return the repository path a block titled `excerpt: <path>` quotes, else None."""
        return self.title.removeprefix("excerpt:").strip() if self.title.startswith("excerpt:") else None

    @property
    def is_example(self) -> bool:
        return self.lang in SHELL | PYTHON and self.title != "answer" and self.excerpt_of is None

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


def excerpt_problems(block: Block) -> list[str]:
    """Return what is wrong with an excerpt: its file missing, or a line of it not found in the file
    after the previous one (lines compared stripped; blank lines skipped)."""
    path = ROOT / (block.excerpt_of or "")
    if not block.excerpt_of or not path.is_file():
        return [f"{block.where}: excerpt of {block.excerpt_of!r}, which is not a file of the project"]
    source = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    at = 0
    for line in (line.strip() for line in block.code.splitlines()):
        if not line:
            continue
        found = next((i for i in range(at, len(source)) if line == source[i]), None)
        if found is None:
            return [f"{block.where}: {line!r} is not in {block.excerpt_of} (after the excerpt's previous line)"]
        at = found + 1
    return []


def _pattern(expected: str) -> re.Pattern:
    parts = ["".join(part.split()) for part in expected.split("…")]
    return re.compile(".*?".join(re.escape(p) for p in parts), re.S)


def matches(expected: str, printed: str) -> bool:
    """Return whether `printed` is what `expected` shows: whitespace ignored, `…` standing for any text.

    Example: `{"status": "ok", …}` matches `{"status":"ok","output":"You said: hi"}`.
    """
    return _pattern(expected).fullmatch("".join(printed.split())) is not None
