"""The one webhook delivery engine (issue 32 item 3): identity agents and org endpoints.

A *channel* (`register_channel`) names where deliveries of one kind live and how they are
signed: `identity` (an identity agent's `webhook_url`, its registered secret; registered by the
identity app) and `org` (an org endpoint or a per-request callback under it; `webhooks.services`).
Every channel's deliveries have the columns of `webhooks.models.DeliveryFields`.

An attempt POSTs the delivery's fixed `payload` (`{"type", "timestamp", "data"}`) with
`webhook-id` (the delivery id: the same on every retry and redelivery, so receivers drop
duplicates), `webhook-timestamp` (Unix seconds of this attempt) and `webhook-signature`
(`v1,<base64 HMAC-SHA256>`, made by the `standardwebhooks` package), through `toolkit.outbound`
with `webhooks.destinations.webhook_policy` (https to public addresses unless
`AGENTS_WEBHOOK_ALLOW_HOSTS` admits the host; the connection goes to the address checked). A 2xx
answer succeeds; another status, a redirect (never followed), a timeout or a refused address
fails it. Each attempt is logged with its status code, error and at most 4 KiB of the answer,
masked (`sessions.scanner.redact_text`), and makes a client span `webhook.deliver`.

**Retry schedule** (`RETRY_SCHEDULE_SECONDS`): after failed attempt n the next is due
5 s, 30 s, 2 min, 10 min, 30 min, 1 h, then every hour, each ±10 % jitter (times
`AGENTS_WEBHOOK_RETRY_SCALE`, 1 in production), until an attempt made
`AGENTS_WEBHOOK_GIVE_UP_SECONDS` (24 h) or more after the delivery was created (or redelivered)
fails; then it is `dead` (kept, redeliverable).
`AGENTS_WEBHOOK_MAX_ATTEMPTS` > 0 caps the attempts too.
**Recovery**: a 2xx from an origin after failures makes that origin's waiting retries (same org,
every channel) due now and hands them on (`recover_origin`: on a retry's 2xx, or any 2xx in a
process that saw the origin fail), so a receiver back from an outage gets its backlog without
waiting out each delivery's back-off; the schedule is the most a retry waits, not the least.

**Durable, never in a run's way**: the delivery row is written first; its attempt is a django-q2
task (`webhooks.tasks.deliver`) that claims the attempt (a conditional update, so two workers
never make the same one) and makes the HTTP request on a small thread pool of the worker
process (`AGENTS_WEBHOOK_THREADS`), so a stalled receiver holds a webhook thread, never a run's
worker. **One queue per receiver origin** in each process (`dispatch`): at most
`MAX_IN_FLIGHT_PER_ORIGIN` requests to one origin at once, the next queued attempt started the
moment one's request ends (its record overlaps the next request: `_request_ended`), so a backlog
drains at the receiver's pace and a stalled receiver holds two threads, never another origin's
turn. Requests go on connections kept open per checked address (`toolkit.outbound` `keep_alive`):
a drain does not open a connection per delivery, and a new DNS answer never reuses the old one. A retry due within `AGENTS_WEBHOOK_FAST_RETRY_SECONDS` goes back to
its origin's queue at its due time by the process's timer thread (`enqueue_later`); later ones,
and whatever a lost process held, are queued by the minute tick (`due_tick`), since the row says
when it is due — the tick is the catch-up, not the pace.

Org context required by every function taking a delivery.
"""

from __future__ import annotations

import json
import logging
import heapq
import itertools
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from opentelemetry.trace import SpanKind
from standardwebhooks import Webhook

from runs import tracing
from agents_site.errors import Conflict
from agents_site.ids import mint_id
from agents_site.vocabulary import DeliveryStatus
from agents_site.wire import rfc3339
from sessions.scanner import redact_text
from tenancy import stores
from toolkit import outbound
from webhooks.destinations import webhook_policy
from webhooks.models import MAX_RESPONSE_CHARS

logger = logging.getLogger(__name__)

#: Seconds after failed attempt 1, 2, …; past the end, every `RETRY_SCHEDULE_SECONDS[-1]`.
RETRY_SCHEDULE_SECONDS = (5, 30, 120, 600, 1800, 3600)
JITTER = 0.1  # ± this fraction of each wait
MAX_ERROR_CHARS = 500
MAX_ANSWER_BYTES = MAX_RESPONSE_CHARS  # read no more of an answer than is kept
SPAN_DELIVER = "webhook.deliver"
GONE_STATUS = 410  # the receiver says the URL is gone for good: the delivery is dead at once, never retried
USER_AGENT = "agents-webhooks/1"


@dataclass(frozen=True)
class Channel:
    """Where one kind of delivery lives and how it is signed.

    `delivery_model` / `attempt_model`: concrete models with `DeliveryFields` / `AttemptFields`
    (the attempt has a `delivery` foreign key). `secret(delivery)` returns the `whsec_…` signing
    secret, or None (the attempt fails: "no webhook secret to sign with"). `after_attempt(delivery, ok, now)`
    (optional) runs after each attempt is recorded (an endpoint's failing streak).
    `hold(delivery) -> bool` (optional) runs first in the transaction recording an attempt: it
    holds what the delivery hangs on against a delete and returns False when that is gone (an
    org endpoint deleted during the attempt), and then nothing is recorded (issue 51).
    """

    name: str
    delivery_model: type
    attempt_model: type
    secret: Callable[[object], str | None]
    after_attempt: Callable[[object, bool, datetime], None] | None = None
    hold: Callable[[object], bool] | None = None


_channels: dict[str, Channel] = {}
_clock: Callable[[], datetime] = timezone.now


def register_channel(channel: Channel) -> None:
    """Make `channel` deliverable (called from an app's `ready()`; the last registration wins)."""
    _channels[channel.name] = channel


def channel(name: str) -> Channel:
    """Return the registered channel `name` (KeyError when none is)."""
    return _channels[name]


def channels() -> list[Channel]:
    """Return every registered channel."""
    return list(_channels.values())


def now() -> datetime:
    """Return the engine's current time (tests move it with `set_clock`)."""
    return _clock()


def set_clock(clock: Callable[[], datetime] | None) -> None:
    """Use `clock()` as the engine's time (None: the real one). For tests driving the schedule."""
    global _clock
    _clock = clock or timezone.now


def _setting(name: str, default: float) -> float:
    value = getattr(settings, name, default)
    return float(default if value is None else value)


def new_message_id() -> str:
    """Return a fresh Standard Webhooks message id `msg_…`."""
    return mint_id("msg")


def event_body(event_type: str, data: dict, *, at: datetime | None = None) -> str:
    """Return the JSON text of an event: `{"type", "timestamp" (RFC 3339), "data"}`, compact."""
    return json.dumps({"type": str(event_type), "timestamp": rfc3339(at or now()), "data": data}, separators=(",", ":"))


def retry_delay(failed_attempts: int, *, rng: random.Random | None = None) -> float:
    """Return the seconds to wait after failed attempt `failed_attempts` (1-based), jittered ±10 %.

    The schedule is `RETRY_SCHEDULE_SECONDS` (5 s, 30 s, 2 min, 10 min, 30 min, 1 h), then hourly,
    times `AGENTS_WEBHOOK_RETRY_SCALE`.
    """
    index = min(max(failed_attempts, 1), len(RETRY_SCHEDULE_SECONDS)) - 1
    base = RETRY_SCHEDULE_SECONDS[index] * _setting("AGENTS_WEBHOOK_RETRY_SCALE", 1.0)
    return base * (rng or random).uniform(1 - JITTER, 1 + JITTER)


def sign(secret: str, message_id: str, when: datetime, body: str) -> str:
    """Return the `webhook-signature` header of `body` (`v1,<base64>`; `standardwebhooks`)."""
    return Webhook(secret).sign(message_id, when, body)


@dataclass
class AttemptResult:
    """What one HTTP attempt gave: status code (None: no answer), error ("" on 2xx), masked answer, ms."""

    status_code: int | None
    error: str
    response_body: str
    duration_ms: int

    @property
    def ok(self) -> bool:
        return not self.error


def post(*, url: str, secret: str | None, message_id: str, body: str, event_type: str = "") -> AttemptResult:
    """POST `body` to `url` signed with `secret` as message `message_id`; return what happened.

    Never raises for the receiver's behaviour: a refused address, a timeout, a transport error,
    a redirect or a non-2xx status is an `AttemptResult` with an `error` sentence. The answer's
    first 4 KiB are kept, credentials masked. Emits a client span `webhook.deliver`.
    """
    started = time.monotonic()
    attributes = {"http.request.method": "POST", "url.full": url.split("?", 1)[0], "webhooks.event_type": str(event_type),
                  "webhooks.message_id": message_id}
    with tracing.tracer().start_as_current_span(SPAN_DELIVER, kind=SpanKind.CLIENT, attributes=attributes) as span:
        result = _post(url=url, secret=secret, message_id=message_id, body=body, started=started)
        if result.status_code is not None:
            span.set_attribute("http.response.status_code", result.status_code)
        if result.error:
            span.set_status(tracing.error_status(result.error))
    return result


def _post(*, url: str, secret: str | None, message_id: str, body: str, started: float) -> AttemptResult:
    def done(code, error, answer=""):
        return AttemptResult(code, error[:MAX_ERROR_CHARS], answer, int((time.monotonic() - started) * 1000))

    if not secret:
        return done(None, "no webhook secret to sign with")
    when = timezone.now()
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": message_id,
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": sign(secret, message_id, when, body),
    }
    try:
        response = outbound.request(webhook_policy(), "POST", url, headers=headers, content=body.encode(),
                                    timeout=_setting("AGENTS_WEBHOOK_TIMEOUT_SECONDS", 10), max_bytes=MAX_ANSWER_BYTES,
                                    keep_alive=True)
    except outbound.Refused as exc:
        return done(None, f"refused destination: {exc}")
    except outbound.TimedOut:
        return done(None, "timed out")
    except outbound.Failed as exc:
        return done(None, f"request failed: {exc}")
    answer = _masked_answer(response.content)
    if 200 <= response.status_code < 300:
        return done(response.status_code, "", answer)
    if 300 <= response.status_code < 400:
        return done(response.status_code, "redirects are not followed", answer)
    return done(response.status_code, f"the receiver answered {response.status_code}", answer)


def _masked_answer(content: bytes) -> str:
    text = (content or b"")[:MAX_ANSWER_BYTES].decode("utf-8", "replace").replace("\x00", "")
    return redact_text(text)[0][:MAX_RESPONSE_CHARS] if text else ""


def _claim(ch: Channel, delivery_id: str, *, force: bool):
    """Take the next attempt of `delivery_id` if it is open and due; None otherwise.

    The attempt counter is bumped by a conditional update and `next_attempt_at` pushed past the
    attempt's timeout (a lease), so two workers never make the same attempt.
    """
    at = now()
    model = ch.delivery_model
    row = model.objects.filter(public_id=delivery_id).first()
    if row is None or row.status not in DeliveryStatus.OPEN:
        return None
    if not force and row.next_attempt_at is not None and row.next_attempt_at > at:
        return None
    lease = at + timedelta(seconds=_setting("AGENTS_WEBHOOK_TIMEOUT_SECONDS", 10) + 60)
    taken = model.objects.filter(pk=row.pk, attempts=row.attempts, status__in=DeliveryStatus.OPEN).update(
        attempts=row.attempts + 1, next_attempt_at=lease, updated_at=at
    )
    if not taken:
        return None
    row.attempts += 1
    return row


def _gives_up(row, at: datetime) -> bool:
    cap = int(_setting("AGENTS_WEBHOOK_MAX_ATTEMPTS", 0))
    if cap > 0 and row.attempts >= cap:
        return True
    return at >= row.created_at + timedelta(seconds=_setting("AGENTS_WEBHOOK_GIVE_UP_SECONDS", 86400))


def attempt(channel_name: str, delivery_id: str, *, force: bool = False):
    """Make one attempt of delivery `delivery_id` of channel `channel_name` if due (or `force`).

    Returns the delivery after the attempt, or None when there was nothing to attempt (unknown,
    finished, not due, or taken by another worker). Records the attempt and the new status:
    `succeeded`, `retrying` (with `next_attempt_at` from the schedule) or `dead` (24 h passed, or
    the receiver answered 410 Gone).
    A retry due soon is queued again at its due time (`AGENTS_WEBHOOK_FAST_RETRY_SECONDS`).
    """
    ch = channel(channel_name)
    row = _claim(ch, delivery_id, force=force)
    if row is None:
        return None
    result = post(url=row.url, secret=ch.secret(row), message_id=row.public_id, body=row.payload, event_type=row.event_type)
    _request_ended()  # the receiver is done with it: its origin's next attempt starts while this one is recorded
    at = now()
    retry_in = None
    with stores.org_atomic():
        if ch.hold is not None and not ch.hold(row):
            return None  # deleted with its endpoint during the attempt: nothing left to record
        ch.attempt_model.objects.create(delivery=row, number=row.attempts, status_code=result.status_code, error=result.error,
                                        response_body=result.response_body, duration_ms=result.duration_ms, created_at=at)
        fields = {"last_status_code": result.status_code, "last_error": result.error, "updated_at": at}
        if result.ok:
            fields.update(status=DeliveryStatus.SUCCEEDED, delivered_at=at, next_attempt_at=None)
        else:
            delay = retry_delay(row.attempts)
            if result.status_code == GONE_STATUS or _gives_up(row, at):
                fields.update(status=DeliveryStatus.DEAD, next_attempt_at=None)
            else:
                retry_in = delay
                fields.update(status=DeliveryStatus.RETRYING, next_attempt_at=at + timedelta(seconds=delay))
        # Only while still open: a cascade delete may have cancelled it meanwhile.
        if ch.delivery_model.objects.filter(pk=row.pk, status__in=DeliveryStatus.OPEN).update(**fields):
            for name, value in fields.items():  # the row as written: no read back
                setattr(row, name, value)
        else:
            row = ch.delivery_model.objects.get(pk=row.pk)
        if ch.after_attempt is not None:
            ch.after_attempt(row, result.ok, at)
    if retry_in is not None and row.status == DeliveryStatus.RETRYING:
        enqueue_later(stores.current_org(), channel_name, row.public_id, retry_in)
    origin = _origin(row.url)
    if not result.ok:
        with _lock:
            _failed_origins.add(origin)
    elif row.status == DeliveryStatus.SUCCEEDED and (row.attempts > 1 or origin in _failed_origins):
        recovered = recover_origin(row.url)
        if sum(len(ids) for ids in recovered.values()) < RECOVER_BATCH:
            with _lock:
                _failed_origins.discard(origin)  # nothing more waits: healthy traffic makes no query
        _hand_on_recovered(recovered)
    return row


def recover_origin(url: str) -> dict[str, list[str]]:
    """After a 2xx from the origin of `url`: make its waiting retries due now; return their ids by channel.

    `attempt` calls it after a 2xx that ends a retry (attempt 2 or later), or after any 2xx from
    an origin this process saw fail since its last recovery there — so a healthy receiver's
    traffic costs no query, and after an outage the first 2xx of a retry (in any process), or of
    any delivery in a process that saw the failures, sends what waited.

    Every delivery of this org (every channel) to the same origin (scheme, host, port) that is
    `retrying` with its next attempt still ahead and its last attempt recorded (not one being
    attempted right now, whose lease looks the same) gets `next_attempt_at` = now, at most
    `RECOVER_BATCH` per channel per 2xx (the next 2xx takes the next batch). A receiver back from
    an outage so gets what waited without each delivery's back-off; its attempts still go at most
    `MAX_IN_FLIGHT_PER_ORIGIN` at once per process. Nothing else changes (attempt counts, the 24 h).
    """
    origin = _origin(url)
    if not origin.strip(":/"):
        return {}
    at = now()
    same_origin = Q(url__iexact=origin) | Q(url__istartswith=origin + "/") | Q(url__istartswith=origin + "?")
    recovered: dict[str, list[str]] = {}
    for ch in channels():
        model = ch.delivery_model
        recorded = Exists(ch.attempt_model.objects.filter(delivery=OuterRef("pk"), number=OuterRef("attempts")))
        waiting = model.objects.filter(same_origin, status=DeliveryStatus.RETRYING, next_attempt_at__gt=at).filter(recorded)
        ids = list(waiting.order_by("next_attempt_at", "id").values_list("public_id", flat=True)[:RECOVER_BATCH])
        if ids and waiting.filter(public_id__in=ids).update(next_attempt_at=at, updated_at=at):
            recovered[ch.name] = ids
    return recovered


def _hand_on_recovered(recovered: dict[str, list[str]]) -> None:
    """Attempt what `recover_origin` made due: in this process's origin queue when on a webhook
    thread, else (a console test, the inline mode) through the task queue."""
    org = stores.current_org()
    for channel_name, ids in recovered.items():
        if getattr(_on_webhook_thread, "active", False):
            dispatch(org, channel_name, ids)
        else:
            enqueue(org, channel_name, ids)


def deliveries_due(channel_name: str, *, limit: int = 200) -> list[str]:
    """Return the ids of open deliveries of `channel_name` whose next attempt is due, oldest first."""
    model = channel(channel_name).delivery_model
    return list(
        model.objects.filter(status__in=DeliveryStatus.OPEN, next_attempt_at__lte=now())
        .order_by("next_attempt_at", "id")
        .values_list("public_id", flat=True)[:limit]
    )


def reopen(channel_name: str, delivery) -> object:
    """Redeliver a finished delivery under its own `webhook-id`: open again, due now, a fresh 24 h.

    409 (`Conflict`) while it is still being attempted. Queues its attempt once the change commits.
    """
    ch = channel(channel_name)
    if delivery.status in DeliveryStatus.OPEN:
        raise Conflict("the delivery is still being attempted")
    at = now()
    with stores.org_atomic():
        ch.delivery_model.objects.filter(pk=delivery.pk).update(status=DeliveryStatus.PENDING, next_attempt_at=at, created_at=at,
                                                               updated_at=at, delivered_at=None)
        on_commit_enqueue(channel_name, [delivery.public_id])
    return ch.delivery_model.objects.get(pk=delivery.pk)


# --- queueing: one queue per receiver origin in each process ----------------------------------

#: Attempts one process makes at once to one origin (scheme, host, port): a stalled receiver can
#: hold this many webhook threads, never all of them. What is over waits in the origin's queue of
#: this process and starts the moment one of its attempts ends.
MAX_IN_FLIGHT_PER_ORIGIN = 2
#: Retrying deliveries made due at once by one 2xx, per channel and pass (`recover_origin`).
RECOVER_BATCH = 500

_lock = threading.Condition()  # guards the pool, the queues, the counts and the timers below
_pool: ThreadPoolExecutor | None = None
_queues: dict[str, deque] = {}  # origin → deque of (org, channel, delivery id), due order
_queued: set[tuple[str, str, str]] = set()  # in some origin's queue of this process
_running: dict[tuple[str, str, str], str] = {}  # being attempted on a webhook thread of this process → its origin
_again: set[tuple[str, str, str]] = set()  # handed on again while running: queued once it ends
_in_flight: dict[str, int] = {}  # origin → requests in flight (an attempt's slot, given back when its request ends)
_timers: list[tuple[datetime, int, str, str, str, bool]] = []  # heap of (due, seq, org, channel, id, local)
_timer_thread: threading.Thread | None = None
_timer_seq = itertools.count()
_on_webhook_thread = threading.local()
_failed_origins: set[str] = set()  # origins an attempt of this process failed to since their last recovery


def on_commit_enqueue(channel_name: str, delivery_ids: list[str]) -> None:
    """Queue the first attempt of `delivery_ids` once the current org transaction commits."""
    if not delivery_ids:
        return
    org = stores.current_org()
    ids = list(delivery_ids)
    transaction.on_commit(lambda: enqueue(org, channel_name, ids), using=stores.current_alias())


def enqueue(org: str, channel_name: str, delivery_ids: list[str]) -> None:
    """Queue one django-q2 task attempting `delivery_ids` of `org` (never raises: the tick retries)."""
    try:
        from django_q.tasks import async_task

        # save=False: no django-q2 success row per task (the delivery's own attempt log is the
        # record); saving one prunes the success table in a write transaction on the default
        # database, which every run's debit also writes.
        async_task("webhooks.tasks.deliver", org, channel_name, list(delivery_ids), group="webhooks.deliver", save=False)
    except Exception:
        logger.warning("could not queue webhook deliveries %s", delivery_ids, exc_info=True)


def _threads() -> int:
    return int(_setting("AGENTS_WEBHOOK_THREADS", 4))


def enqueue_later(org: str, channel_name: str, delivery_id: str, delay: float) -> None:
    """Hand delivery `delivery_id` on again `delay` seconds from now (the engine's clock) when the
    delay is within `AGENTS_WEBHOOK_FAST_RETRY_SECONDS`; later retries are left to the minute tick.

    One timer thread per process holds every such retry (a heap, not a thread each). At its due
    time the delivery goes to its origin's queue in this process (`dispatch`) when the attempt was
    made on one of its webhook threads, else (an attempt made inline: the console's test, the
    inline mode) to the task queue (`enqueue`), so a web process never makes webhook attempts on
    its own threads. Lost with the process, the row still says when it is due: the minute tick
    queues it. `AGENTS_WEBHOOK_FAST_RETRY_SECONDS` <= 0: no timer at all (the tick alone; the
    tests drive the schedule so — a retry due at once on the timer thread raced the test's tick).
    """
    fast = _setting("AGENTS_WEBHOOK_FAST_RETRY_SECONDS", 60)
    if fast <= 0 or delay > fast:
        return
    global _timer_thread
    due = now() + timedelta(seconds=max(0.0, delay))
    with _lock:
        local = bool(getattr(_on_webhook_thread, "active", False)) and _threads() > 0
        heapq.heappush(_timers, (due, next(_timer_seq), org, channel_name, delivery_id, local))
        if _timer_thread is None or not _timer_thread.is_alive():
            _timer_thread = threading.Thread(target=_timer_loop, name="webhooks-timers", daemon=True)
            _timer_thread.start()
        _lock.notify_all()


def _take_due_timers() -> list[tuple[str, str, str, bool]]:
    """Pop every timer due by the engine's clock (`_lock` held); return their (org, channel, id, local)."""
    at, fired = now(), []
    while _timers and _timers[0][0] <= at:
        fired.append(heapq.heappop(_timers)[2:])
    return fired


def _fire(fired: list[tuple[str, str, str, bool]]) -> None:
    for org, channel_name, delivery_id, local in fired:
        try:
            if local and _threads() > 0:
                dispatch(org, channel_name, [delivery_id])
            else:
                enqueue(org, channel_name, [delivery_id])
        except Exception:
            logger.warning("could not hand on webhook retry %s of org %s", delivery_id, org, exc_info=True)


def _timer_loop() -> None:
    while True:
        with _lock:
            fired = _take_due_timers()
            while not fired:
                wait = (_timers[0][0] - now()).total_seconds() if _timers else None
                _lock.wait(timeout=None if wait is None else min(max(wait, 0.001), 1.0))  # re-reads the clock each second
                fired = _take_due_timers()
        _fire(fired)
        close_old_connections()


def fire_due_timers() -> int:
    """Hand on every retry timer due by the engine's clock now, in this thread; return how many
    (tests moving the clock; the timer thread does the same on its own)."""
    with _lock:
        fired = _take_due_timers()
    _fire(fired)
    return len(fired)


def _origin(url: str) -> str:
    parts = urlsplit(url or "")
    return f"{parts.scheme}://{parts.netloc}".lower()


def _pump(origin: str) -> None:
    """Start the next queued attempts to `origin` while it has fewer than the cap in flight (`_lock` held)."""
    queue = _queues.get(origin)
    while _pool is not None and queue and _in_flight.get(origin, 0) < MAX_IN_FLIGHT_PER_ORIGIN:
        key = queue.popleft()
        _queued.discard(key)
        _running[key] = origin
        _in_flight[origin] = _in_flight.get(origin, 0) + 1
        _pool.submit(_in_thread, key, origin)
    if queue is not None and not queue:
        del _queues[origin]


def _request_ended() -> None:
    """Give back the origin slot this webhook thread's attempt holds, and start the origin's next
    queued attempt (no-op off the webhook threads, or when given back already).

    `attempt` calls it the moment its request ends: the slot bounds the requests a receiver has in
    flight from this process (a stalled one holds two threads), while the attempt's record — a
    few milliseconds of store work, never waiting on the receiver — overlaps the next request.
    """
    origin = getattr(_on_webhook_thread, "slot", None)
    if origin is None:
        return
    _on_webhook_thread.slot = None
    with _lock:
        _in_flight[origin] = _in_flight.get(origin, 1) - 1
        if _in_flight[origin] <= 0:
            del _in_flight[origin]
        _pump(origin)
        _lock.notify_all()


def _in_thread(key: tuple[str, str, str], origin: str) -> None:
    org, channel_name, delivery_id = key
    close_old_connections()
    _on_webhook_thread.active = True
    _on_webhook_thread.slot = origin
    try:
        with stores.org_context(org, create=False):
            attempt(channel_name, delivery_id)
    except Exception:
        logger.exception("webhook delivery %s of org %s failed", delivery_id, org)
    finally:
        _request_ended()  # not given back yet when nothing was attempted (not due, taken elsewhere) or it raised
        _on_webhook_thread.active = False
        close_old_connections()
        with _lock:
            _running.pop(key, None)
            if key in _again:  # handed on again while it ran (its fast retry, the tick): queued now
                _again.discard(key)
                _queued.add(key)
                _queues.setdefault(origin, deque()).append(key)
            _pump(origin)
            _lock.notify_all()


def dispatch(org: str, channel_name: str, delivery_ids: list[str]) -> int:
    """Attempt `delivery_ids`: on the process's webhook threads (`AGENTS_WEBHOOK_THREADS` > 0), or
    inline (0: tests, and the django-q2 sync mode). Returns how many were taken (inline: all).

    On threads, each open delivery joins the queue of its receiver's origin (scheme, host, port)
    in this process, in the order given (the tick and the recovery give due order): at most
    `MAX_IN_FLIGHT_PER_ORIGIN` attempts to one origin run at once, and when one ends the next
    queued one starts at once — a stalled receiver holds two threads, never the others' turn.
    A delivery already queued here is not queued twice; one running here is queued again once
    it ends (its attempt is claimed, so a delivery that is not due then is skipped).
    """
    global _pool
    threads = _threads()
    if threads <= 0:
        with stores.org_context(org, create=False):
            for delivery_id in delivery_ids:
                attempt(channel_name, delivery_id)
        return len(delivery_ids)
    with stores.org_context(org, create=False):
        urls = dict(channel(channel_name).delivery_model.objects.filter(public_id__in=list(delivery_ids), status__in=DeliveryStatus.OPEN)
                    .values_list("public_id", "url"))
    taken = 0
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="webhooks")
        origins = set()
        for delivery_id in delivery_ids:
            key = (org, channel_name, delivery_id)
            if delivery_id not in urls or key in _queued:
                continue
            origin = _origin(urls[delivery_id])
            if key in _running:
                _again.add(key)
            else:
                _queued.add(key)
                _queues.setdefault(origin, deque()).append(key)
                origins.add(origin)
            taken += 1
        for origin in origins:
            _pump(origin)
    return taken


def idle(timeout: float | None = None) -> bool:
    """Wait until this process has no webhook attempt queued or running (at most `timeout` s);
    return whether it is idle. Retry timers not yet due do not count. For tests and benches."""
    with _lock:
        return _lock.wait_for(lambda: not _queued and not _running and not _again, timeout=timeout)


def queued_count() -> dict[str, int]:
    """Return `{origin: attempts queued or running}` of this process (the bench and tests read it)."""
    with _lock:
        out = {origin: len(queue) for origin, queue in _queues.items()}
        for origin in _running.values():
            out[origin] = out.get(origin, 0) + 1
        return out


def reset() -> None:
    """Drop this process's queues and timers and wait for the running attempts to end (tests)."""
    global _pool
    with _lock:
        _queues.clear()
        _queued.clear()
        _again.clear()
        _timers.clear()
        _failed_origins.clear()
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)
    with _lock:
        _running.clear()
        _in_flight.clear()
        _lock.notify_all()
