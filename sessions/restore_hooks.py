"""What a restored org store needs from the event log: its head, and a clock moved past every
position the replaced store may have handed out (registered with `tenancy.backups.restore`).

Both run on the database alias of a restored file or database that is not serving yet, outside
any org context (every query names the alias).
"""

from __future__ import annotations

from django.utils import timezone

from sessions.models import EventClock, PositionGap


def clock_head(alias: str) -> int:
    """Return the event clock's last position in the store behind `alias` (0 when it has none)."""
    return EventClock.objects.using(alias).filter(pk=1).values_list("last", flat=True).first() or 0


def clock_void_through(alias: str, floor: int) -> int:
    """Move the clock of `alias`'s store to `floor`, recording positions head+1 … floor−1 as void.

    Returns the head before the move (the restored moment's). No-op when `floor` is not past it.
    The caller runs it in one transaction on `alias` (`tenancy.backups.restore`).
    """
    head = clock_head(alias)
    if floor > head:
        PositionGap.objects.using(alias).create(after=head, until=floor, created_at=timezone.now())
        if not EventClock.objects.using(alias).filter(pk=1).update(last=floor):
            EventClock.objects.using(alias).create(id=1, last=floor)
    return head
