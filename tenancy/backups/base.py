"""What restore, replication, status and PostgreSQL mode share, below all four (no import cycle).

The refusal every restore raises (`RestoreError`), the event clock the sessions app registers
(`register_event_clock`), the position floor a restore moves the clock to, the replica
generations (`tenancy.ReplicaGeneration`) and one org's backup status (`OrgBackupStatus`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from agents_site.vocabulary import BackupState, ReplicaGenerationEnd, RestoreStatus
from tenancy.backups import litestream
from tenancy.models import OrgRestore, ReplicaGeneration

#: A restore moves the event clock to the next multiple of this above every position known:
#: positions of the store it replaces (< 2**32 past its own epoch's start) are never reused.
POSITION_EPOCH = 2**32


class RestoreError(RuntimeError):
    """A restore refused or failed; the message names the cause. The live store is unchanged.

    The message never carries a replica URL's password (`litestream.hide_passwords`): it is
    printed, stored in the org's restore row and shown to the org's admins.
    """

    def __init__(self, message: str) -> None:
        super().__init__(litestream.hide_passwords(str(message)))


@dataclass
class EventClock:
    """A store's event clock, by alias: `head(alias) -> int`, `void_through(alias, floor) -> int`."""

    head: Callable[[str], int]
    void_through: Callable[[str, int], int]


_clock: EventClock | None = None


def register_event_clock(*, head: Callable[[str], int], void_through: Callable[[str, int], int]) -> None:
    """Called by the sessions app (`ready()`): read a store's event head by alias, and move its
    clock to a floor recording the positions in between as void (returns the head before)."""
    global _clock
    _clock = EventClock(head, void_through)


def event_clock() -> EventClock | None:
    """Return the registered event clock (None before the sessions app is ready)."""
    return _clock


def floor_above(*positions: int | None) -> int:
    """Return the next multiple of `POSITION_EPOCH` strictly above every known position."""
    top = max([p for p in positions if p is not None] or [0])
    return (top // POSITION_EPOCH + 1) * POSITION_EPOCH


def previous_floor(slug: str) -> int | None:
    """Return the position floor of org `slug`'s last finished restore (None: never restored)."""
    return (OrgRestore.objects.using("default").filter(slug=slug, status=RestoreStatus.DONE)
            .order_by("-position_floor").values_list("position_floor", flat=True).first())


def new_generation(slug: str, *, end_current: ReplicaGenerationEnd | None):
    """Start a new `ReplicaGeneration` for org `slug`, ending the current one with `end_current`."""
    now = timezone.now()
    name = "g" + now.strftime("%Y%m%dT%H%M%S%fZ")
    with transaction.atomic(using="default"):
        if end_current is not None:
            ReplicaGeneration.objects.using("default").filter(slug=slug, ended_at__isnull=True).update(
                ended_at=now, end_reason=end_current)
        return ReplicaGeneration.objects.using("default").create(
            slug=slug, name=name, replica_url=litestream.join(litestream.base_url(), "orgs", slug, name), started_at=now)


@dataclass
class OrgBackupStatus:
    """One org's backup: `state` (`replicating`, `not replicating`, `restoring`, `no backup`,
    `unreachable`, `off`), lag (seconds, None if unknown), last snapshot and newest shipped
    change (UTC, None if none), the replica URL and a `detail` sentence."""

    slug: str
    state: BackupState
    lag_seconds: float | None = None
    last_snapshot: dt.datetime | None = None
    newest_change: dt.datetime | None = None
    replica_url: str = ""
    detail: str = ""
