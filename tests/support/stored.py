"""What a store holds, read the way its engine keeps it (for "stored only as a hash" checks)."""

from __future__ import annotations

import os
from tests.support.files import file_bytes


def stored_bytes(connection) -> bytes:
    """Return everything database `connection` holds: the SQLite file and its WAL, or, on
    PostgreSQL, every row of every table as `row::text` (the server's files are not ours to read)."""
    if connection.vendor == "sqlite":
        path = connection.settings_dict["NAME"]
        connection.close()
        return b"".join(file_bytes(p) for p in (path, path + "-wal") if os.path.exists(p))
    return "\n".join(every_row_as_text(connection)).encode()


def every_row_as_text(connection) -> list[str]:
    """Every row of every table of a PostgreSQL database, as `row::text`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = [r[0] for r in cursor.fetchall()]
        rows: list[str] = []
        for table in tables:
            cursor.execute(f'SELECT t::text FROM "{table}" t')
            rows += [r[0] for r in cursor.fetchall()]
    return rows
