"""Commit-to-turn provenance: `Agents-Session:` / `Agents-Turn:` trailers (DESIGN §7; reference §7.3).

A commit an agent made during a session carries two trailers in its message (or the same two
lines in a git note under `refs/notes/agents-provenance`):

    Agents-Session: sess_0123…
    Agents-Turn: 7

Nothing about the binding is stored server-side: `VERIFY_COMMAND` is the exact `git log` a
reader runs in the repository, and `parse_links` turns its output into the bindings. Shared
by the server (`sessions.provenance`) and `python -m runner verify` (Django-free).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NOTES_REF = "refs/notes/agents-provenance"
VERIFY_COMMAND = f"git log --format='%x00%H%n%B%n%N' --notes={NOTES_REF}"
SESSION_TRAILER = "Agents-Session"
TURN_TRAILER = "Agents-Turn"
MAX_SESSION_ID = 128

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_TURN = re.compile(r"[0-9]{1,18}")
_TRAILER = re.compile(r"^\s*(Agents-Session|Agents-Turn)\s*:\s*(\S+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Link:
    """One binding: commit `commit` (hex sha) was made in turn `turn` of session `session`."""

    commit: str
    session: str
    turn: int


def parse_links(output: str) -> list[Link]:
    """Return the bindings in the output of `VERIFY_COMMAND`, in log order.

    The output is split on NUL; each record's first line is the commit sha (7–64 hex), the
    rest its message and notes. A record binds only with both trailers: a session id of at
    most 128 characters and a turn that is a positive integer. When a trailer appears more
    than once, the last occurrence wins (a note written after the commit overrides it).
    Example record: `"\\x00" + sha + "\\nfix\\n\\nAgents-Session: sess_1\\nAgents-Turn: 3\\n"` →
    `Link(sha, "sess_1", 3)`.
    """
    links: list[Link] = []
    for record in output.split("\x00"):
        lines = record.strip("\n").split("\n")
        sha = lines[0].strip().lower() if lines else ""
        if not _SHA.fullmatch(sha):
            continue
        session = turn = None
        for line in lines[1:]:
            match = _TRAILER.match(line)
            if match is None:
                continue
            key, value = match.group(1).lower(), match.group(2)
            if key == SESSION_TRAILER.lower():
                session = value
            else:
                turn = value
        if not session or len(session) > MAX_SESSION_ID or turn is None or not _TURN.fullmatch(turn) or int(turn) <= 0:
            continue
        links.append(Link(commit=sha, session=session, turn=int(turn)))
    return links
