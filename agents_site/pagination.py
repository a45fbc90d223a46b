"""Cursor pagination for every list of `/v1/agents`: one limit rule, one cursor format, one keyset read.

A list answers `{<items>: [...], "nextCursor": "<opaque>"}`; `nextCursor` is absent on the last
page. The client passes it back as `?cursor=` (with the same filters) to read the next page.

* Keyset, never OFFSET: a page is "the `limit` rows that sort after the last row of the previous
  page", under a total order whose last key is unique (the primary key, or another unique
  column). Rows with equal timestamps are therefore never skipped or repeated, and a row
  inserted during a walk either sorts before the cursor (a newer row: not shown in this walk)
  or after it (shown once); it can never duplicate or hide a row that was already there.
* The cursor is `<body>.<mac>`: `body` urlsafe base64 (no padding) of compact JSON `{"l": <list
  tag>, "k": [<sort key of the last row>]}`, `mac` the urlsafe base64 of the first 16 bytes of
  HMAC-SHA256 under a key derived from `SECRET_KEY` (Django's `salted_hmac`, salt
  `agents_site.pagination.cursor`) over the body and the list's scope: the store the list reads
  (the org's database alias) and the SQL of its filters (the agent of an agent's runs, the
  status, the kind, the org of a ledger). So the server accepts only cursors it issued for
  this very list of this very org: another org's cursor, an org-wide runs cursor used on one
  agent's runs, or an edited cursor is 400 `invalid_request`, as is one that does not decode,
  has the wrong number of keys or keys of the wrong type (issue 29, signed cursors).
* `limit`: absent → the list's default; above its maximum → clamped to the maximum; below 1
  or not an integer → 400 (this departs on purpose from the reference's silent default).

Example::

    page = keyset_page(Run.objects.filter(status__in=RunStatus.FINISHED),
                       order=("-finished_at", "-id"), limit=50, cursor=None, tag="runs")
    page.items        # ≤ 50 runs, newest first
    page.next_cursor  # "eyJsIjoicnVucyIsImsiOlsiMjAyNi0xMi0wMVQwMjo0Nzo0Ny4xMjM0NTYrMDA6MDAiLCJydW5fLi4uIl19.3q2-7w…" or None
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Generic, TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.utils.crypto import salted_hmac
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


_SALT = "agents_site.pagination.cursor"
_MAC_BYTES = 16


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _mac(body: str, scope: str) -> str:
    """Return the urlsafe base64 of the truncated HMAC-SHA256 binding `body` to `scope`."""
    return _b64(salted_hmac(_SALT, f"{body}|{scope}", algorithm="sha256").digest()[:_MAC_BYTES])


def list_scope(queryset: QuerySet) -> str:
    """Return what a cursor of `queryset`'s list is bound to: its store alias and its filters' SQL (hashed).

    Two lists share a scope only when they read the same store with the same filters, e.g. an
    org's runs and one agent's runs differ (the agent's id is in the SQL), and so do two orgs.
    """
    try:
        sql = str(queryset.order_by().query)
    except Exception:  # a filter that can match nothing (`pk__in=[]`) has no SQL: the model names it
        sql = queryset.model._meta.label
    return hashlib.sha256(f"{queryset.db}\0{sql}".encode()).hexdigest()


def encode_cursor(*, tag: str, keys: list[Any], scope: str = "") -> str:
    """Return the signed cursor for sort `keys` of list `tag` in `scope` (`<body>.<mac>`, urlsafe, no padding)."""
    raw = json.dumps({"l": tag, "k": [_to_json(k) for k in keys]}, separators=(",", ":"), ensure_ascii=True)
    body = _b64(raw.encode())
    return f"{body}.{_mac(body, scope)}"


def decode_cursor(cursor: str, *, tag: str, size: int, scope: str = "") -> list[Any]:
    """Return the `size` raw sort keys carried by `cursor`; raise `InvalidRequest` (400) unless this
    server signed it for list `tag` in `scope` (the keys are not yet typed: see `keyset_page`)."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > CURSOR_MAX_LENGTH:
        raise InvalidRequest(_MALFORMED)
    body, dot, mac = cursor.partition(".")
    if not dot or not hmac.compare_digest(mac.encode("ascii", "replace"), _mac(body, scope).encode()):
        raise InvalidRequest(_MALFORMED)
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
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
    shape) so a cursor of another list is refused; the cursor is signed and bound to the
    queryset's store and filters (`list_scope`), so only a cursor issued for this list of this
    org passes. Reads `limit + 1` rows in one query (plus
    whatever the queryset's own annotations cost). The scope (the filters' SQL, compiled
    apart from the query) is worked out only for a page that reads or writes a cursor: the
    first page of a list that fits in it compiles its SQL once. Raises `InvalidRequest` (400)
    for a malformed or foreign cursor.
    """
    model = queryset.model
    columns = [name.lstrip("-") for name in order]
    base, scope = queryset, None
    if cursor is not None:
        scope = list_scope(base)
        raw = decode_cursor(cursor, tag=tag, size=len(order), scope=scope)
        keys = [_typed(model, column, value) for column, value in zip(columns, raw, strict=True)]
        queryset = queryset.filter(_after(order, keys))
    rows = list(queryset.order_by(*order)[: limit + 1])
    if len(rows) <= limit:
        return Page(items=rows, next_cursor=None)
    rows = rows[:limit]
    last = rows[-1]
    keys = [getattr(last, model._meta.get_field(column).attname) for column in columns]
    return Page(items=rows, next_cursor=encode_cursor(tag=tag, keys=keys, scope=scope if scope is not None else list_scope(base)))
