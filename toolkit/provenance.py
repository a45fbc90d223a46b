"""Commit-to-turn provenance: `Agents-Session:` / `Agents-Turn:` trailers (DESIGN §7; reference §7.3).

A commit an agent made during a session carries two trailers in its message (or the same two
lines in a git note under `refs/notes/agents-provenance`):

    Agents-Session: sess_0123…
    Agents-Turn: 7

Nothing about the binding is stored server-side: `VERIFY_COMMAND` is the exact `git log` a
reader runs in the repository, and `parse_links` turns its output into the bindings. Both live
in `toolkit.verify_build`, the one-file verifier a reader downloads from a build page (it must
stand alone, so the parsing is there and only named here): the server (`sessions.provenance`),
`python -m runner verify` and that file read trailers with the same code (issue 57).
"""

from toolkit.verify_build import MAX_SESSION_ID, NOTES_REF, SESSION_TRAILER, TURN_TRAILER, VERIFY_COMMAND, Link, parse_links

__all__ = ["MAX_SESSION_ID", "NOTES_REF", "SESSION_TRAILER", "TURN_TRAILER", "VERIFY_COMMAND", "Link", "parse_links"]
