"""Routed coding runs (`targetId`): offered to a registered machine (reference §1.9).

Not built yet: a coding run with `targetId` is refused with 400 until the runner side exists.
"""

from __future__ import annotations

from agents_site.errors import InvalidRequest


def check_target(target_id: object) -> str:
    """Refuse a routed coding run: the machine side is not built yet (400)."""
    raise InvalidRequest("targetId: routed coding runs are not supported on this server yet; omit targetId to run here")


def routed_coding_offer(*, org: str, run_id: str) -> None:
    """Offer coding run `run_id` to its machine (not built yet)."""
    raise NotImplementedError
