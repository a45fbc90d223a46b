"""Balances and the ledger, in the default database (money never lives in an org file)."""

from django.db import models
from django.db.models import Q

from agents_site.vocabulary import LedgerKind


class Account(models.Model):
    """An org's balance in cents. Changed only with a ledger row, in one transaction."""

    org = models.OneToOneField("tenancy.Org", on_delete=models.CASCADE, related_name="account")
    balance_cents = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.org}: {self.balance_cents}¢"


class LedgerEntry(models.Model):
    """One movement of money: a credit (+) or a run's debit (−), in cents.

    A run is debited at most once: `(org, run_id)` is unique for `kind=agent`.
    """

    org = models.ForeignKey("tenancy.Org", on_delete=models.CASCADE, related_name="ledger")
    kind = models.CharField(max_length=16, choices=LedgerKind.choices)
    amount_cents = models.BigIntegerField()
    run_id = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    actor = models.CharField(max_length=300, blank=True, default="")
    request_id = models.CharField(max_length=128, blank=True, default="")
    note = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "ledger entries"
        constraints = [
            models.UniqueConstraint(
                fields=["org", "run_id"], condition=Q(kind=LedgerKind.AGENT), name="uniq_ledger_debit_per_run"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.amount_cents}¢ {self.run_id}"
