"""Wire helpers shared by every API: timestamps and optional fields."""

from __future__ import annotations

from datetime import datetime, timezone


def rfc3339(value: datetime | None) -> str:
    """Return `value` as RFC 3339 UTC to the second (`2026-11-30T09:04:11Z`), "" for None."""
    if value is None:
        return ""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact(view: dict, *, keep: tuple[str, ...] = ()) -> dict:
    """Drop keys whose value is None or "" (omitempty), except those named in `keep`."""
    return {k: v for k, v in view.items() if k in keep or (v is not None and v != "")}
