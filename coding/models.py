"""Repositories an org registered and the coding runs made against them (the org's own store).

Routed by tenancy.db_router to the current org's database (label `coding` is an org app).
"""

from django.db import models

from agents_site.ids import mint_id


def new_repo_id() -> str:
    """Return a fresh repository id, `repo_` + 32 hex."""
    return mint_id("repo")


class Repo(models.Model):
    """A git repository the org's coding runs may clone and push: `owner/name` is unique.

    `credential` is the *name* of a push credential the operator granted to this org
    (`AGENTS_REPO_CREDENTIALS`); the value itself is never stored, returned or sent anywhere.
    """

    id = models.CharField(primary_key=True, max_length=64, default=new_repo_id, editable=False)
    owner = models.CharField(max_length=100)
    name = models.CharField(max_length=100)
    clone_url = models.CharField(max_length=2048)
    default_branch = models.CharField(max_length=255, default="main")
    credential = models.CharField(max_length=100, default="", blank=True)
    created_by = models.CharField(max_length=300, default="", blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["owner", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="uq_repo_owner_name")]

    @property
    def full_name(self) -> str:
        """Return `owner/name`."""
        return f"{self.owner}/{self.name}"

    def __str__(self) -> str:
        return self.full_name


class CodingRun(models.Model):
    """What a coding run was asked and what it produced, beside its `Run` row (same id).

    `branch` is the run's own branch `agents/<short session id>`; `pushed` is True once the
    remote accepted it; `head_sha`/`diffstat`/`changed` describe the final state.
    """

    run_id = models.CharField(primary_key=True, max_length=64)
    session_id = models.CharField(max_length=64, db_index=True, default="", blank=True)
    repo_id = models.CharField(max_length=64)
    repo = models.CharField(max_length=201)  # owner/name when the run started
    project = models.CharField(max_length=128, default="", blank=True)
    base = models.CharField(max_length=255, default="", blank=True)
    after = models.CharField(max_length=64, default="", blank=True)
    start_ref = models.CharField(max_length=255, default="", blank=True)  # what was checked out first
    branch = models.CharField(max_length=255)
    tool = models.CharField(max_length=16)
    target_id = models.CharField(max_length=128, default="", blank=True)
    timeout_seconds = models.PositiveIntegerField()
    changed = models.BooleanField(default=False)
    pushed = models.BooleanField(default=False)
    head_sha = models.CharField(max_length=64, default="", blank=True)
    diffstat = models.TextField(default="", blank=True)
    commits = models.JSONField(default=list, blank=True)  # [{sha, subject, turn, diffstat}]
    reply_conversation_id = models.CharField(max_length=64, default="", blank=True)  # the run's summary goes there at its end
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.run_id} on {self.repo} ({self.branch})"
