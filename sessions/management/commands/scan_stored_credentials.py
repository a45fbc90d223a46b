"""`manage.py scan_stored_credentials`: report stored values the credential scanner flags (issue 29 item 9).

Reads every text column (CharField, TextField, JSONField) of every table of every org's store
(SQLite files or PostgreSQL databases, whichever the deployment uses) and of the shared database's
org-facing tables (orgs, API keys, the ledger), scans each value with `sessions.scanner` as it is
now, and prints one line per finding — org, table, column, row, rule, severity, masked preview,
SHA-256 fingerprint — then a count per org, table and column. Never the value, and never a write:
values stored before the scanner knew their format stay as they are; the report says what to
rotate (see docs/guides/credentials.md, "Credentials already stored").

    manage.py scan_stored_credentials [--org SLUG ...] [--json]

`--json` prints one object `{"findings": [...], "summary": [...]}` instead. Exit status 0 either way.
"""

from __future__ import annotations

import json
from collections import Counter

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import models

from sessions.scanner import scan_payload, scan_text
from tenancy import stores

SHARED_APP_LABELS = ("tenancy", "billing")  # the shared database's tables that hold what org members wrote
SHARED = "(shared)"
_TEXT_FIELDS = (models.CharField, models.TextField, models.JSONField)
_CHUNK = 500


def _text_columns(model) -> list[models.Field]:
    return [f for f in model._meta.concrete_fields if isinstance(f, _TEXT_FIELDS) and not f.primary_key]


def _findings(value) -> list:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return scan_text(value)
    return scan_payload(value)


def scan_models(model_list, *, using: str, org: str):
    """Yield one dict per finding in the text columns of `model_list` on database `using` (read only)."""
    tables: set[str] = set()
    for model in model_list:
        columns = _text_columns(model)
        if not columns or model._meta.proxy or model._meta.db_table in tables:  # a proxy reads its concrete model's table
            continue
        tables.add(model._meta.db_table)
        names = [f.attname for f in columns]
        rows = model._default_manager.using(using).order_by("pk").values_list("pk", *names)
        for pk, *values in rows.iterator(chunk_size=_CHUNK):
            for field, value in zip(columns, values):
                for finding in _findings(value):
                    yield {"org": org, "table": model._meta.db_table, "column": field.column, "row": str(pk), **finding.as_dict()}


def scan_stored(*, orgs: list[str] | None = None, shared: bool = True):
    """Yield every finding in the org stores named (every existing store when None), then the shared tables."""
    org_models = [m for label in sorted(stores.ORG_APP_LABELS) for m in apps.get_app_config(label).get_models()]
    for slug in orgs if orgs else stores.existing_org_slugs():
        with stores.org_context(slug, create=False) as alias:
            yield from scan_models(org_models, using=alias, org=slug)
    if shared:
        shared_models = [m for label in SHARED_APP_LABELS for m in apps.get_app_config(label).get_models()]
        yield from scan_models(shared_models, using="default", org=SHARED)


class Command(BaseCommand):
    help = "Report (never rewrite) stored values the credential scanner flags, per org, table and column: masked previews and fingerprints only."

    def add_arguments(self, parser):
        parser.add_argument("--org", action="append", dest="org_slugs", metavar="SLUG", help="scan only this org's store (repeatable)")
        parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")

    def handle(self, *args, **options):
        orgs = options["org_slugs"]
        found = list(scan_stored(orgs=orgs, shared=not orgs))
        counts = Counter((f["org"], f["table"], f["column"]) for f in found)
        summary = [{"org": o, "table": t, "column": c, "findings": n} for (o, t, c), n in sorted(counts.items())]
        if options["json"]:
            self.stdout.write(json.dumps({"findings": found, "summary": summary}, indent=1))
            return
        for f in found:
            self.stdout.write(f"{f['org']}\t{f['table']}.{f['column']}\trow {f['row']}\tline {f['line']}\t{f['rule']}\t{f['severity']}\t"
                              f"{f['preview']}\tsha256:{f['fingerprint']}")
        for row in summary:
            self.stdout.write(f"{row['org']}\t{row['table']}.{row['column']}\t{row['findings']} finding(s)")
        self.stdout.write(f"{len(found)} stored credential(s) in {len(summary)} column(s) of {len({r['org'] for r in summary})} store(s); "
                          "nothing was changed: rotate each credential, then remove or edit the value that holds it.")
