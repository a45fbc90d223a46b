"""Django's PostgreSQL engine, safe across a fork (django-q2's workers).

Django's native pool (psycopg-pool; `OPTIONS["pool"]`, agents_site/settings.py) keeps the
connections a thread hands back open, in a dict on the `DatabaseWrapper` class: one pool per
alias, the default database's and each org database's (tenancy/backends/postgres.py). A forked
child inherits those pools whole — their idle connections are the parent's server sessions, the
same sockets, and their maintenance threads do not exist in the child. django-q2 forks its
workers (and re-forks one after each recycle or death) from a process that has used the
database, after `connections.close_all()`, which hands the connections back to the pool, open;
so each worker's first query — the minute tasks' `existing_org_slugs` — went down a session the
parent and its siblings used too, and two processes interleaving one protocol stream answered
"the last operation didn't produce records" or "server closed the connection" (issue 51).

So in a forked child, before it runs anything else (`os.register_at_fork`), every inherited pool
and every connection a wrapper of the forking thread still holds is forgotten: never used and
never closed — a close would end the parent's session (psycopg sends the server a Terminate) —
and kept referenced for the child's life, so no finaliser touches them either (psycopg itself
never finishes another pid's connection). The child's first query opens a pool of its own. The
guard is installed when this module is imported: it is the default database's engine whenever
that is PostgreSQL, and the pools it forgets are every alias's, whichever engine opened them.
"""

from __future__ import annotations

import os

from django.db import connections
from django.db.backends.postgresql import base as postgresql_base

# What a forked child inherited from its parent: referenced until the child exits, never closed.
_inherited: list = []


class DatabaseWrapper(postgresql_base.DatabaseWrapper):
    """Django's PostgreSQL `DatabaseWrapper`; its module forgets inherited connections in a forked child."""


def forget_after_fork() -> None:
    """In a forked child: drop every inherited PostgreSQL pool and held connection without closing them."""
    pools = postgresql_base.DatabaseWrapper._connection_pools  # one dict, shared by every subclass
    _inherited.extend(pools.values())
    pools.clear()
    for wrapper in connections.all(initialized_only=True):
        if wrapper.vendor != "postgresql" or wrapper.connection is None:
            continue
        _inherited.append(wrapper.connection)
        wrapper.connection = None
        if wrapper.in_atomic_block:  # as Django's close() leaves a wrapper closed mid-transaction
            wrapper.closed_in_transaction = True
            wrapper.needs_rollback = True


os.register_at_fork(after_in_child=forget_after_fork)
