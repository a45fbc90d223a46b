"""Settings of a child process a test starts that must share the test's own default database.

The site's settings, except that `AGENTS_TEST_DEFAULT_SQLITE` (the parent test's SQLite default
database file) replaces the default database even when `DATABASE_URL` names a PostgreSQL server
for PostgreSQL org stores: the child then reads the parent's orgs, keys and restore records
(tenancy.OrgRestore, read on every org context in PostgreSQL mode), as one deployment's
processes all do.
"""

import os

from agents_site.settings import *  # noqa: F401,F403
from agents_site.settings import AGENTS_SQLITE_AUTOCHECKPOINT_PAGES, DATABASES, SQLITE_ENGINE

_default = os.environ.get("AGENTS_TEST_DEFAULT_SQLITE")
if _default:
    DATABASES["default"] = {
        "ENGINE": SQLITE_ENGINE,
        "NAME": _default,
        "CONN_MAX_AGE": 0,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": f"PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint={AGENTS_SQLITE_AUTOCHECKPOINT_PAGES};",
        },
    }
