"""Every org transaction opens through `stores.org_atomic()`: a scan of the org apps' sources.

A bare `transaction.atomic()` opens its transaction on `default` and leaves the org store in
autocommit; `atomic(using=router.db_for_write(...))` or `atomic(using=alias)` is the right store
today but bypasses the one door (and its `serialize=` option). The only `atomic` allowed in org
code names the default database explicitly (`using=DEFAULT_DB_ALIAS`), for rows that live there.
"""

import ast
from pathlib import Path

from django.apps import apps

from tenancy import stores

ROOT = Path(__file__).resolve().parents[2]

def _org_app_dirs() -> list[Path]:
    return sorted({Path(apps.get_app_config(label).path) for label in stores.ORG_APP_LABELS})


def _names_default(call: ast.Call) -> bool:
    for kw in call.keywords:
        if kw.arg == "using":
            value = kw.value
            return (isinstance(value, ast.Name) and value.id == "DEFAULT_DB_ALIAS") or (
                isinstance(value, ast.Constant) and value.value == "default"
            )
    return False


def bare_atomics(source: str) -> list[int]:
    """Return the line numbers of every `atomic` in `source` that is not `org_atomic` or default's."""
    tree = ast.parse(source)
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _names_default(node):
            allowed.add(id(node.func))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("django.db.transaction", "django.db"):
            if any(alias.name == "atomic" for alias in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "atomic" and id(node) not in allowed:
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "atomic" and id(node) not in allowed:
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_every_form_of_a_bare_atomic():
    source = (
        "from django.db import router, transaction\n"
        "with transaction.atomic():\n    pass\n"
        "with transaction.atomic(using=router.db_for_write(Run)):\n    pass\n"
        "@transaction.atomic\ndef f():\n    pass\n"
        "with stores.org_atomic():\n    pass\n"
        "with transaction.atomic(using=DEFAULT_DB_ALIAS):\n    pass\n"
    )
    assert bare_atomics(source) == [2, 4, 6]


def test_org_code_opens_transactions_only_through_org_atomic():
    offenders = []
    for app_dir in _org_app_dirs():
        for path in sorted(app_dir.rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/migrations/" in rel:
                continue
            offenders.extend(f"{rel}:{line}" for line in bare_atomics(path.read_text()))
    assert offenders == []
