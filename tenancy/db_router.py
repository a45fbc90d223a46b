"""The database router: org models go to the current org's store, everything else to default.

It fails closed: an org model touched with no org selected raises `NoOrgSelected`; it never
falls back to `default`. `allow_migrate` depends only on `(db, app_label)`.
"""

from tenancy import stores


class OrgRouter:
    """Route `stores.ORG_APP_LABELS` models to `stores.current_alias()`."""

    def _route(self, model, **hints):
        if model._meta.app_label not in stores.ORG_APP_LABELS:
            return None
        alias = stores.current_alias()
        instance = hints.get("instance")
        if instance is not None and instance._state.db and instance._state.db != alias:
            raise stores.NoOrgSelected("an object of one org was used while acting for another")
        return alias

    def db_for_read(self, model, **hints):
        """Return the current org's alias for org models; None (default) otherwise."""
        return self._route(model, **hints)

    def db_for_write(self, model, **hints):
        """Return the current org's alias for org models; None (default) otherwise."""
        return self._route(model, **hints)

    def allow_relation(self, obj1, obj2, **hints):
        """Allow relations only inside one database."""
        return obj1._state.db == obj2._state.db

    def allow_migrate(self, db, app_label, **hints):
        """Org apps migrate only on org stores; every other app only outside them."""
        if stores.is_org_alias(db):
            return app_label in stores.ORG_APP_LABELS
        return app_label not in stores.ORG_APP_LABELS
