"""Commit-to-turn provenance for the server (DESIGN §7; reference §7.3): the one implementation
lives in the Django-free core, `toolkit.provenance` (`toolkit.verify_build`), shared with `python -m runner verify`
and the one-file verifier a build page offers."""

from toolkit.provenance import MAX_SESSION_ID, NOTES_REF, SESSION_TRAILER, TURN_TRAILER, VERIFY_COMMAND, Link, parse_links

__all__ = ["MAX_SESSION_ID", "NOTES_REF", "SESSION_TRAILER", "TURN_TRAILER", "VERIFY_COMMAND", "Link", "parse_links"]
