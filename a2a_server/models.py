"""What the A2A face stores in an org's store: which agents the org lists in its public directory.

Routed by `tenancy.db_router` to the current org's database (`a2a_server` is an org app).
"""

from django.db import models


class PublicCard(models.Model):
    """An agent the org lists in its public directory of A2A agent cards (off by default: no row).

    `agent_id` names the agent (a plain column, like identity's rows: deleting the agent leaves a
    row no card is served for). `listed_by` is the actor (`<org>/<subject>`) who listed it.
    """

    agent_id = models.CharField(max_length=64, unique=True)
    listed_by = models.CharField(max_length=300)
    listed_at = models.DateTimeField()

    class Meta:
        ordering = ["-listed_at", "agent_id"]

    def __str__(self) -> str:
        return f"{self.agent_id} (public since {self.listed_at:%Y-%m-%d})"
