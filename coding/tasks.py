"""django-q2 entry points of the coding engine (run in `manage.py qcluster` workers)."""

from __future__ import annotations

from tenancy import stores
from coding.services import coding_execute


def execute_coding_run(org: str, run_id: str) -> str:
    """Execute queued coding run `run_id` of org `org`; return its status (safe to deliver twice)."""
    with stores.org_context(org, create=False):
        return coding_execute(run_id=run_id)
