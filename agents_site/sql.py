"""Plain SQL for the few statements on the request and run paths that are run on every request.

Composing a query with the ORM (filters, compiler, converters) costs more than the database
takes to run it: ≈ 0.5–1.5 ms of Python per statement on a 2-core machine against ≈ 0.1 ms in
SQLite (BENCHMARKS.md, issue 16). The hot statements — the API key lookup, an agent by id or
name, a session's control log, a run's finish (and where its `run.finished` goes), the fees
held, the balance read and the debit — are written once per database vendor as plain SQL, and
their rows are turned into model instances exactly as the ORM would (`from_row`: the backend's
converters, so dates are dates and booleans booleans on SQLite as on PostgreSQL). Everything
else stays on the ORM.

Only identifiers from the models' own metadata are ever put into the SQL text; every value is
a parameter. New rows go in with `insert` (what the ORM's insert sends, without composing it).
"""

from __future__ import annotations

from django.db import models

_SELECT: dict[tuple, str] = {}  # (model label, vendor, table alias) → the column list


def select_list(model: type[models.Model], connection, *, table: str | None = None) -> str:
    """Return the quoted column list of `model`'s concrete fields, in `_meta` order (`t.col, …`).

    `table` qualifies each column (a table alias of the statement). Built once per process.
    """
    key = (model._meta.label, connection.vendor, table)
    text = _SELECT.get(key)
    if text is None:
        quote = connection.ops.quote_name
        prefix = f"{table}." if table else ""
        text = _SELECT[key] = ", ".join(prefix + quote(field.column) for field in model._meta.concrete_fields)
    return text


def table_name(model: type[models.Model], connection) -> str:
    """Return `model`'s quoted table name."""
    return connection.ops.quote_name(model._meta.db_table)


def from_row(model: type[models.Model], connection, alias: str, row) -> models.Model:
    """Return the `model` instance of a row selected with `select_list(model, …)`, as the ORM reads it.

    Each value goes through the backend's and the field's converters (SQLite hands dates back
    as text and booleans as integers; JSON as text), and the instance is marked as loaded from
    database `alias`.
    """
    values = []
    for field, value in zip(model._meta.concrete_fields, row):
        column = field.get_col(model._meta.db_table)
        for convert in connection.ops.get_db_converters(column) + field.get_db_converters(connection):
            value = convert(value, column, connection)
        values.append(value)
    return model.from_db(alias, [field.attname for field in model._meta.concrete_fields], values)


def in_list(values) -> tuple[str, list]:
    """Return `("%s, %s, …", [values…])` for an `IN (…)` of a fixed set of values (sorted, so the text is stable)."""
    ordered = sorted(str(value) for value in values)
    return ", ".join(["%s"] * len(ordered)), ordered


def insert(objs: list[models.Model], connection) -> None:
    """Insert `objs` (new instances of one model) with one `INSERT … VALUES` statement.

    Each value is what the ORM's insert would send: the field's `pre_save` (so `auto_now_add`
    stamps) prepared for this database. A model whose primary key the database assigns (an
    auto field) takes one object per call; its new key is read back (`RETURNING`). The
    instances are marked saved to `connection`. Raises the database's `IntegrityError` for a
    constraint the rows break (nothing inserted).
    """
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    auto = meta.pk if getattr(meta.pk, "db_returning", False) else None
    if auto is not None and len(objs) > 1:
        raise ValueError(f"{meta.label}: one row per insert when the database assigns the key")
    fields = [field for field in meta.concrete_fields if field is not auto]
    quote = connection.ops.quote_name
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [field.get_db_prep_save(field.pre_save(obj, True), connection) for obj in objs for field in fields]
    text = (f"INSERT INTO {table_name(model, connection)} ({', '.join(quote(field.column) for field in fields)}) "
            f"VALUES {', '.join([row] * len(objs))}")
    with connection.cursor() as cursor:
        if auto is None:
            cursor.execute(text, params)
        else:  # RETURNING: PostgreSQL, and SQLite ≥ 3.35 (the minimum, system check agents.E001)
            cursor.execute(f"{text} RETURNING {quote(auto.column)}", params)
            setattr(objs[0], auto.attname, cursor.fetchone()[0])
    for obj in objs:
        obj._state.adding, obj._state.db = False, connection.alias
