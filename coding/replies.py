"""What a finished coding run tells the world, server run or routed alike: the reply posted into its
`replyConversationId` and the `coding.pushed` webhook. Org context required.
"""

from __future__ import annotations

import logging

from agents_site.vocabulary import RunStatus
from coding.models import CodingRun
from chat.services import conversation_post_assistant
from runs.models import Run
from tenancy import stores
from webhooks import events as webhook_events

logger = logging.getLogger(__name__)


def coding_pushed_announce(*, coding: CodingRun, run: Run) -> int:
    """Emit `coding.pushed` (issue 32) for a finished coding run whose record says it pushed; return
    how many deliveries were queued (0 when nothing was pushed or no endpoint listens).

    The one place both paths announce a push: a server run after `coding_execute`, a routed run
    after the machine's report settles it (`coding.routing.routed_coding_settled`). `coding`: the
    run's `CodingRun` as recorded after the run (its `pushed`, `branch`, `head_sha`, `repo`).
    Org context required.
    """
    if not coding.pushed:
        return 0
    return webhook_events.coding_pushed(run, branch=coding.branch, commit=coding.head_sha, repo=coding.repo)


def coding_build_path(coding: CodingRun) -> str:
    """Return where the run can be read: its build page `/builds/{org}/{project}/{sessionId}/` when it has a
    project (shown once the session is published), else its console page `/console/coding/{runId}/`."""
    if coding.project:
        return f"/builds/{stores.current_org()}/{coding.project}/{coding.session_id}/"
    return f"/console/coding/{coding.run_id}/"


def coding_reply_text(*, coding: CodingRun, run: Run) -> str:
    """Return the run's summary as posted into its `replyConversationId`: status, branch, head, diffstat, build link."""
    summary = (run.output or "").strip().splitlines()[0] if run.status == RunStatus.OK and (run.output or "").strip() else ""
    lines = [f"Coding run {run.status} on {coding.repo}" + (f": {summary}" if summary else "")]
    if run.status != RunStatus.OK and run.error:
        lines.append(f"error: {run.error}")
    lines.append(f"branch: {coding.branch}" + ("" if coding.pushed else " (not pushed)"))
    if coding.head_sha:
        lines.append(f"head: {coding.head_sha}")
    lines.append("")
    lines.append(coding.diffstat or "no changes")
    lines.append("")
    lines.append(f"build: {coding_build_path(coding)}")
    return "\n".join(lines).strip()


def coding_reply_post(*, coding: CodingRun, run: Run) -> bool:
    """Append the run's summary to its `replyConversationId` as an assistant turn; return whether it was posted.

    Nothing to do without one; a conversation deleted meanwhile is skipped (logged). Never raises.
    """
    if not coding.reply_conversation_id:
        return False
    try:
        posted = conversation_post_assistant(conversation_id=coding.reply_conversation_id, text=coding_reply_text(coding=coding, run=run), run_id=run.id)
    except Exception:
        logger.warning("coding run %s: its summary could not be posted to %s", run.id, coding.reply_conversation_id, exc_info=True)
        return False
    if not posted:
        logger.info("coding run %s: conversation %s is gone; summary not posted", run.id, coding.reply_conversation_id)
    return posted
