"""Signals of the tenancy layer, for higher layers to act on without being imported here."""

from django.dispatch import Signal

#: Sent once an org row exists (created or found) by `tenancy.services.org_create`; `org=` the Org.
#: Billing connects to it to open the org's account.
org_created = Signal()
