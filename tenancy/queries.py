"""Hand-written SQL on tenancy's tables: the fast path's seam for this app (issue 27 item 3).

Every statement the request path runs as plain SQL instead of through the ORM lives in the
`queries` module of the app that owns its tables (`agents_site.sql` says why: composing a query
costs more than running it). Each function runs one statement on the connection it is given or
on the default database, takes and returns plain values or model instances, and is tested on
SQLite and PostgreSQL (`tests/tenancy/test_queries.py`). Only identifiers from the models' own
metadata go into the SQL text; every value is a parameter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, router, transaction

from agents_site import sql
from agents_site.vocabulary import ApiKeyScope
from tenancy.models import ApiKey, Membership, Org


@dataclass(frozen=True)
class ApiKeyRow:
    """What one API-key lookup reads: the key, its user, its org and the membership's admin flag.

    `stale_stamp` is True when the key's `last_used_at` is unset or older than the lookup's
    `stale_before`; `member_admin` is None when the user is no longer a member of the key's org.
    """

    key_id: int
    revoked: bool
    stale_stamp: bool
    scope: str
    allowed_agents: object
    username: str
    user_active: bool
    user_id: int
    org_slug: str
    member_admin: bool | None


_KEY_SQL: dict[str, str] = {}  # vendor → the statement (built once per process)


def _key_sql(connection) -> str:
    text = _KEY_SQL.get(connection.vendor)
    if text is None:
        q = connection.ops.quote_name
        user_model = get_user_model()
        key, org, member, user = (q(m._meta.db_table) for m in (ApiKey, Org, Membership, user_model))
        username = q(user_model._meta.get_field(user_model.USERNAME_FIELD).column)
        text = (
            f"SELECT k.id, k.revoked_at IS NOT NULL, (k.last_used_at IS NULL OR k.last_used_at < %s), k.scope,"
            f" k.allowed_agents, u.{username}, u.is_active, k.user_id, o.slug,"
            f" (SELECT m.is_admin FROM {member} m WHERE m.user_id = k.user_id AND m.org_id = k.org_id)"
            f" FROM {key} k JOIN {user} u ON u.id = k.user_id JOIN {org} o ON o.id = k.org_id"
            f" WHERE k.key_hash = %s"
        )
        _KEY_SQL[connection.vendor] = text
    return text


def api_key_row(*, key_hash: str, stale_before) -> ApiKeyRow | None:
    """Return the API key whose SHA-256 is `key_hash` with its user, org and admin flag, or None.

    ONE indexed statement on the default database (keys, users and orgs live there): the key by
    its unique `key_hash`, its user and org joined, the membership (unique on user, org) as a
    correlated subquery. `stale_before` is a datetime (the key's stamp is stale before it).
    """
    connection = transaction.get_connection(router.db_for_read(ApiKey) or DEFAULT_DB_ALIAS)
    with connection.cursor() as cursor:
        cursor.execute(_key_sql(connection), [connection.ops.adapt_datetimefield_value(stale_before), key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    allowed = row[4]
    if isinstance(allowed, (str, bytes)):  # SQLite (and psycopg's text loader) hand JSON back as text
        allowed = json.loads(allowed)
    return ApiKeyRow(key_id=row[0], revoked=bool(row[1]), stale_stamp=bool(row[2]), scope=row[3] or ApiKeyScope.ALL,
                     allowed_agents=allowed, username=row[5], user_active=bool(row[6]), user_id=row[7],
                     org_slug=row[8], member_admin=None if row[9] is None else bool(row[9]))


def org_by_slug(slug: str) -> Org | None:
    """Return the org with `slug`, read from the default database in ONE statement, or None.

    Raises `DatabaseError` when the database cannot be read.
    """
    connection = transaction.get_connection(router.db_for_read(Org) or DEFAULT_DB_ALIAS)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.select_list(Org, connection)} FROM {sql.table_name(Org, connection)} WHERE slug = %s", [slug])
        row = cursor.fetchone()
    return None if row is None else sql.from_row(Org, connection, connection.alias, row)
