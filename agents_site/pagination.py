"""Cursor pagination for every list of `/v1/agents`: one limit rule, one cursor format, one keyset read.

A list answers `{<items>: [...], "nextCursor": "<opaque>"}`; `nextCursor` is absent on the last
page. The client passes it back as `?cursor=` (with the same filters) to read the next page.

* Keyset, never OFFSET: a page is "the `limit` rows that sort after the last row of the previous
  page", under a total order whose last key is unique (the primary key, or another unique
  column). Rows with equal timestamps are therefore never skipped or repeated, and a row
  inserted during a walk either sorts before the cursor (a newer row: not shown in this walk)
  or after it (shown once); it can never duplicate or hide a row that was already there.
* The cursor is urlsafe base64 (no padding) of compact JSON `{"l": <list tag>, "k": [<sort
  key of the last row>]}`. It is opaque to clients; a cursor that does not decode, has the
  wrong number of keys, keys of the wrong type, or belongs to another list (another tag) is
  400 `invalid_request`.
* `limit`: absent → the list's default; above its maximum → clamped to the maximum; below 1
  or not an integer → 400 (this departs on purpose from the reference's silent default).

Example::

    page = keyset_page(Run.objects.filter(status__in=RunStatus.FINISHED),
                       order=("-finished_at", "-id"), limit=50, cursor=None, tag="runs")
    page.items        # ≤ 50 runs, newest first
    page.next_cursor  # "eyJsIjoicnVucyIsImsiOlsiMjAyNi0xMi0wMVQwMjo0Nzo0Ny4xMjM0NTYrMDA6MDAiLCJydW5fLi4uIl19" or None
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from ninja import Query

from agents_site.errors import InvalidRequest

T = TypeVar("T")

#: A cursor longer than this is not one this server handed out.
CURSOR_MAX_LENGTH = 1024

_MALFORMED = "cursor is malformed or belongs to another list; pass back the nextCursor of this list"


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: its rows in list order and the cursor of the next page (None at the end)."""

    items: list[T] = field(default_factory=list)
    next_cursor: str | None = None


def page_limit(limit: Any, *, default: int, maximum: int) -> int:
    """Return the page size for `limit`: None → `default`; above `maximum` → `maximum`.

    Raises `InvalidRequest` (400) for anything but an integer ≥ 1 (a bool is not an integer).
    `page_limit(10**9, default=50, maximum=200) == 200`.
    """
    if limit is None:
        return default
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidRequest("limit must be an integer of at least 1")
    if limit < 1:
        raise InvalidRequest("limit must be an integer of at least 1")
    return min(limit, maximum)


def limit_param(*, default: int, maximum: int):
    """Return the Ninja `?limit=` parameter of a list: an integer ≥ 1, declared in the OpenAPI document.

    Ninja answers a non-integer or a value below 1 with 400 before the route runs.
    """
    return Query(
        None,
        ge=1,
        description=f"Rows per page: an integer of at least 1 (default {default}; above {maximum} means {maximum}).",
    )


def cursor_param():
    """Return the Ninja `?cursor=` parameter of a list, declared in the OpenAPI document."""
    return Query(
        None,
        max_length=CURSOR_MAX_LENGTH,
        description="The `nextCursor` of the previous page of this list, with the same filters; absent for the first page. "
        "A cursor this list did not hand out is a 400.",
    )


def _to_json(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()  # full microseconds: equal timestamps must stay equal
    if isinstance(value, Decimal):
        return str(value)
    return value


def encode_cursor(*, tag: str, keys: list[Any]) -> str:
    """Return the opaque cursor for sort `keys` of list `tag` (urlsafe base64 of compact JSON, no padding)."""
    raw = json.dumps({"l": tag, "k": [_to_json(k) for k in keys]}, separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, *, tag: str, size: int) -> list[Any]:
    """Return the `size` raw sort keys carried by `cursor`; raise `InvalidRequest` (400) unless it
    is a cursor of list `tag` (the keys are not yet typed: see `keyset_page`)."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > CURSOR_MAX_LENGTH:
        raise InvalidRequest(_MALFORMED)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequest(_MALFORMED) from exc
    if not isinstance(data, dict) or data.get("l") != tag:
        raise InvalidRequest(_MALFORMED)
    keys = data.get("k")
    if not isinstance(keys, list) or len(keys) != size or any(k is None or isinstance(k, bool | dict | list) for k in keys):
        raise InvalidRequest(_MALFORMED)
    return keys


def _typed(model, name: str, value: Any) -> Any:
    """Return cursor key `value` as the Python value of `model`'s field `name`; 400 when it is not one."""
    model_field = model._meta.get_field(name)
    try:
        typed = model_field.to_python(value)
    except (ValidationError, TypeError, ValueError) as exc:
        raise InvalidRequest(_MALFORMED) from exc
    if typed is None:
        raise InvalidRequest(_MALFORMED)
    if isinstance(typed, datetime) and typed.tzinfo is None:
        raise InvalidRequest(_MALFORMED)  # every cursor this server writes carries its offset
    return typed


def _after(order: tuple[str, ...], keys: list[Any]) -> Q:
    """Return the filter "sorts strictly after `keys` under `order`" (a lexicographic keyset)."""
    condition = Q(pk__in=[])
    equal = Q()
    for name, key in zip(order, keys, strict=True):
        column = name.lstrip("-")
        beyond = Q(**{f"{column}__lt" if name.startswith("-") else f"{column}__gt": key})
        condition |= equal & beyond
        equal &= Q(**{column: key})
    return condition


def keyset_page(queryset: QuerySet, *, order: tuple[str, ...], limit: int, cursor: str | None, tag: str) -> Page:
    """Return one page of `queryset` sorted by `order`, after `cursor`, at most `limit` rows.

    `order` names concrete, non-null model fields (`"-x"` descending), and its LAST field must be
    unique (the primary key) so the order is total. `tag` names the list (and its filters'
    shape) so a cursor of another list is refused. Reads `limit + 1` rows in one query (plus
    whatever the queryset's own annotations cost). Raises `InvalidRequest` (400) for a
    malformed or foreign cursor.
    """
    model = queryset.model
    columns = [name.lstrip("-") for name in order]
    if cursor is not None:
        raw = decode_cursor(cursor, tag=tag, size=len(order))
        keys = [_typed(model, column, value) for column, value in zip(columns, raw, strict=True)]
        queryset = queryset.filter(_after(order, keys))
    rows = list(queryset.order_by(*order)[: limit + 1])
    if len(rows) <= limit:
        return Page(items=rows, next_cursor=None)
    rows = rows[:limit]
    last = rows[-1]
    keys = [getattr(last, model._meta.get_field(column).attname) for column in columns]
    return Page(items=rows, next_cursor=encode_cursor(tag=tag, keys=keys))
