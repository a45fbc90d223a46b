"""The org's webhook events (issue 32 item 1): what happens, who hears it, what they get.

Each event is delivered to every enabled endpoint subscribed to its type (and `run.finished`
also to the run's own callback, `webhooks.callbacks`), as `{"type", "timestamp", "data"}` whose
`data` is the public shape the API answers for the thing — never a credential:

* `run.finished` (every run kind, ok or error): the run record (`GET /v1/agents/runs/{id}`),
  written by the run observer's `finishing` (`runs.hooks.RunObserver`)
  in the finish's own transaction — a finished run always has its deliveries, and the run's
  thread pays one bulk insert of them (no transaction of its own, no HTTP) and, after the
  commit, one task enqueued for all of them;
* `balance.low`: `{balanceCents, thresholdCents, runId}` when a run's debit takes the org's
  balance below `AGENTS_WEBHOOK_BALANCE_LOW_CENTS` (once per crossing);
* `coding.pushed`: the coding run's record plus `{branch, commitSha, repo}` (`coding` calls
  `coding_pushed`);
* `session.published`: the session view (the session observer's `published`, `sessions.hooks`);
* `target.offline`: the machine's view plus `previousStatus`, one event per change of its
  computed status (online ↔ offline, …), emitted by the minute sweep `target_status_sweep`;
* `run.waiting`: the run record plus `approvals` (the calls it waits on, arguments masked) when
  a run suspends for approval (the run observer's `waiting`; issue 28).

Org context required.
"""

from __future__ import annotations

import logging

from django.conf import settings

from runs import hooks
from agents.presenters import run_view
from agents_site.vocabulary import RunStatus, WebhookEventType
from billing.selectors import org_balance_cents
from sessions.hooks import SessionObserver, register_session_observer
from sessions.presenters import session_view
from targets.models import Target
from targets.presenters import target_view
from targets.selectors import effective_status
from tenancy import stores
from webhooks import callbacks, engine, queries, selectors, services
from webhooks.models import Endpoint, RunCallback, TargetStatusSeen

logger = logging.getLogger(__name__)

# Set on a finishing run by `_run_finishing`: whether an enabled endpoint hears `balance.low`,
# for its debit's balance check (`_run_finished`), which then reads the endpoints only to
# deliver. The attribute lives exactly as long as the run instance the finish handed on.
BALANCE_LOW_HEARD = "_webhooks_balance_low_heard"


class WebhookRunObserver(hooks.RunObserver):
    """How the webhooks hear every run (`runs.hooks.RunObserver`): a request's own callback, `run.finished`,
    `balance.low` and `run.waiting`."""

    def started(self, run) -> None:
        _run_started(run)

    def finishing(self, run) -> None:
        _run_finishing(run)

    def finished(self, run, org_slug: str) -> None:
        _run_finished(run, org_slug)

    def waiting(self, run, approvals: list[dict], org_slug: str) -> None:
        _run_waiting(run, approvals, org_slug)

    def resolve_callback(self, url: str) -> callbacks.Callback:
        return callbacks.resolve(url)


class WebhookSessionObserver(SessionObserver):
    """How the webhooks hear a session published (`sessions.hooks.SessionObserver`): `session.published`."""

    def published(self, session) -> None:
        _session_published(session)


RUN_OBSERVER, SESSION_OBSERVER = WebhookRunObserver(), WebhookSessionObserver()


def register_handlers() -> None:
    """Register how the lower apps emit events (from `WebhooksConfig.ready`): the run and session observers."""
    hooks.register_run_observer(RUN_OBSERVER)
    register_session_observer(SESSION_OBSERVER)


def emit(event_type: str, data: dict, *, extra: list[tuple[Endpoint, str]] | None = None) -> int:
    """Deliver event `event_type` with `data` to every enabled endpoint subscribed to it (plus `extra`
    `(endpoint, url)` pairs); return how many deliveries were created."""
    targets = [(e, e.url) for e in selectors.endpoints_for(event_type)] + list(extra or [])
    return len(services.deliveries_create(endpoints_and_urls=targets, event_type=event_type, data=data))


def _run_started(run) -> None:
    """Record the request's own callback (if any) for `run`, the first run the request starts."""
    checked = hooks.requested_callback.get()
    if checked is None:
        return
    hooks.requested_callback.set(None)  # an agent-as-tool sub-run of this request gets none
    # Held against a delete like every row under an endpoint (webhooks.queries.endpoints_held):
    # one deleted since the request was checked gets no callback, as it gets no delivery.
    if queries.endpoints_held([checked.endpoint_pk], stores.current_alias()):
        RunCallback.objects.create(run_id=run.id, endpoint_id=checked.endpoint_pk, url=checked.url, created_at=engine.now())


def _run_finishing(run) -> None:
    """`run.finished` to the subscribed endpoints and the run's own callback, written inside the
    run's finish transaction (queued for delivery once it commits)."""
    targets, heard = selectors.run_finished_reach(run_id=run.id)
    setattr(run, BALANCE_LOW_HEARD, heard)
    if targets:
        services.deliveries_create(endpoints_and_urls=targets, event_type=WebhookEventType.RUN_FINISHED, data=run_view(run))


def _run_finished(run, org_slug: str) -> None:
    """`balance.low` after a run's debit (the finish has committed); reads nothing when the
    finish's read of the endpoints found none that hears it."""
    heard = getattr(run, BALANCE_LOW_HEARD, None)  # None: this run's finish did not read the endpoints
    if run.status != RunStatus.OK or not run.fee_cents or heard is False or _balance_low_threshold() <= 0:
        return
    with stores.org_context(org_slug, create=False):
        _balance_check(run, org_slug, heard=heard)


def _run_waiting(run, approvals: list[dict], org_slug: str) -> None:
    """`run.waiting` to the subscribed endpoints: the run and the calls it waits on."""
    with stores.org_context(org_slug, create=False):
        emit(WebhookEventType.RUN_WAITING, {**run_view(run), "approvals": approvals})


def _balance_low_threshold() -> int:
    return int(getattr(settings, "AGENTS_WEBHOOK_BALANCE_LOW_CENTS", 0) or 0)


def _balance_check(run, org_slug: str, *, heard: bool | None = None) -> None:
    """Emit `balance.low` when run `run`'s debit took org `org_slug`'s balance below the threshold
    (cents); `heard` None reads whether an endpoint hears it first."""
    threshold = _balance_low_threshold()
    if threshold <= 0 or not (heard or selectors.endpoints_for(WebhookEventType.BALANCE_LOW)):
        return
    after = org_balance_cents(org_slug=org_slug)
    if after is not None and after < threshold <= after + run.fee_cents:
        emit(WebhookEventType.BALANCE_LOW, {"balanceCents": after, "thresholdCents": threshold, "runId": run.id})


def coding_pushed(run, *, branch: str, commit: str = "", repo: str = "") -> int:
    """Emit `coding.pushed` for coding run `run` that pushed `branch` (at `commit`) of registered repo `repo` (`owner/name`)."""
    return emit(WebhookEventType.CODING_PUSHED, {**run_view(run), "branch": branch, "commitSha": commit, "repo": repo})


def _session_published(session) -> None:
    emit(WebhookEventType.SESSION_PUBLISHED, session_view(session, org=stores.current_org()))


def target_status_sweep() -> int:
    """Emit one `target.offline` per machine whose computed status changed since the last sweep; return how many.

    A machine seen for the first time is remembered without an event.
    """
    at = engine.now()
    seen = {row.target_id: row for row in TargetStatusSeen.objects.all()}
    emitted = 0
    for target in Target.objects.all():
        status = str(effective_status(target, now=at))
        row = seen.pop(target.id, None)
        if row is None:
            TargetStatusSeen.objects.create(target_id=target.id, status=status, changed_at=at)
            continue
        if row.status == status:
            continue
        previous = row.status
        with stores.org_atomic():
            if TargetStatusSeen.objects.filter(pk=row.pk, status=previous).update(status=status, changed_at=at):
                emit(WebhookEventType.TARGET_OFFLINE, {**target_view(target, now=at), "previousStatus": previous})
                emitted += 1
    if seen:  # machines deregistered since
        TargetStatusSeen.objects.filter(target_id__in=list(seen)).delete()
    return emitted
