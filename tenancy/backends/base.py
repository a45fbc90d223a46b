"""What a kind of org store must provide to `tenancy.stores` (Django's `sessions/backends` shape)."""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

from django.db import connections

#: App labels whose models live in an org's store, never in `default`.
ORG_APP_LABELS = frozenset({"agents", "runs", "agent_sessions", "targets", "identity", "coding", "chat", "webhooks", "a2a_server", "responses_api"})


def migrate(alias: str) -> None:
    """Apply every pending migration to database `alias` (quietly, without system checks)."""
    from django.core.management import call_command

    call_command("migrate", database=alias, verbosity=0, interactive=False, skip_checks=True)


def migrate_if_behind(alias: str) -> bool:
    """Apply pending migrations to database `alias` only if it has any; return whether it had.

    Reading the plan costs a fraction of `migrate` (no signals, no per-app checks), which a
    store already at this code's migrations (a restored backup, usually) then never pays.
    """
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        migrate(alias)
        return True
    return False


def default_settings_copy() -> dict:
    """Return a deep copy of the default database's settings (the base every org alias starts from)."""
    return copy.deepcopy(connections.settings["default"])


class OrgStoreBackend(ABC):
    """One kind of org store. Every method takes an already validated slug.

    The backend builds the database settings of an org and creates its store; it never names
    the alias (that is `tenancy.stores`' job) and never changes which org is current.
    """

    #: The `AGENTS_ORG_DATABASE` value that selects this backend.
    kind: str = ""

    @abstractmethod
    def settings_for(self, slug: str) -> dict:
        """Return the Django `DATABASES` entry of org `slug`'s store."""

    @abstractmethod
    def provision(self, slug: str, alias: str) -> None:
        """Create org `slug`'s store if missing and bring it to the current migrations.

        Called once per process per org, under a per-org lock; must be safe against other
        processes doing the same at the same time. `alias` may be registered by the backend
        (`tenancy.registry.register`) when creating needs a connection.
        """

    @abstractmethod
    def exists(self, slug: str) -> bool:
        """Return True when org `slug` already has a store (never creates one)."""

    def existing(self, slugs: list[str]) -> list[str]:
        """Return those of `slugs` that have a store, in the given order."""
        return [slug for slug in slugs if self.exists(slug)]

    def ensure_templates(self) -> list[str]:
        """Build this code version's store template wherever new stores are made; return where (deploy time)."""
        return []

    def serialize(self, alias: str, key: str) -> None:
        """Inside an open transaction on `alias`, wait until no other `key`-serialised one is open.

        Held until that transaction ends. A backend whose write transactions already exclude
        each other (SQLite's BEGIN IMMEDIATE) needs nothing more.
        """
