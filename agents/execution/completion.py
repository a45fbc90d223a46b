"""The spec's retry and failover policy around one chat completion (reference §3.5).

429, 5xx, connection errors and empty choices (`UpstreamBusy`) are retried up to
`AGENTS_MODEL_ATTEMPTS` (3) times per model with equal-jitter backoff; then the failover model
(`AGENTS_FAILOVER_MODEL`, when set and different) gets its own attempts. Any other failure
(`UpstreamRefused`) fails at once, with no retry and no failover. tenacity drives the loop.

Streaming (issue 12): retries and failover happen only before the first piece of the reply
has reached the caller. Each attempt is streamed into a `ReplySink`; once the sink says it
has delivered text (`delivered`), a failure of that attempt is final: no retry, no failover,
`CompletionFailed.streamed` is True and the run ends `error` keeping what was written.

`complete_async` is the same policy (one `_Policy`, one set of tenacity arguments) awaited on an
event loop with `chat_completion_async`: a run waiting on the model holds no thread, and its stop
cancels the awaiting task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from agents.inference import UpstreamBusy, UpstreamError, chat_completion, chat_completion_async
from toolkit.retry import wait_equal_jitter
from toolkit.stopping import StopSignal, watching


@dataclass
class CompletionFailed(Exception):
    """Every attempt the policy allowed failed; `reason` is the last failure's sentence."""

    reason: str
    model: str
    attempts: int
    busy: bool
    streamed: bool = False  # the failing attempt had already delivered part of its reply

    def __str__(self) -> str:
        return self.reason


@dataclass
class CompletionStopped(Exception):
    """The run's stop interrupted the completion (issue 25): its HTTP request was cancelled and no
    retry or failover followed. `model` is the model being asked, `attempts` the total so far."""

    model: str
    attempts: int

    def __str__(self) -> str:
        return "the completion was stopped"


@dataclass
class Answered:
    """A completion the gateway gave: the SDK object, the model that answered, attempts used."""

    completion: object
    model: str
    attempts: int
    failed_over: bool = False
    retries: list[str] = field(default_factory=list)


class ReplySink:
    """Where one attempt's reply goes while it streams (the run loop's masker and listeners).

    `start()` is called before each attempt (a retried attempt starts a fresh reply);
    `piece(text)` with each raw piece of the reply as the gateway sends it (must not raise);
    `delivered` is True once any text has reached the caller: from then on no retry and no
    failover. The base sink delivers nothing (a caller that does not listen).
    """

    delivered = False

    def start(self) -> None:
        """Begin a new attempt's reply."""

    def piece(self, text: str) -> None:
        """Take one raw piece of the reply."""


def models_for(primary: str) -> list[str]:
    """Return the models to try in order: `primary`, then the failover model if set and different."""
    models = [primary]
    failover = (settings.AGENTS_FAILOVER_MODEL or "").strip()
    if failover and failover != primary:
        models.append(failover)
    return models


class _Policy:
    """The retry and failover policy's state over one completion, shared by `complete` and
    `complete_async` (each only drives its own calls, waits and `on_retry`): the attempts so far,
    the retry reasons, the last busy failure, and what each outcome becomes."""

    def __init__(self, *, models: list[str], sink: ReplySink, stop: StopSignal | None, generation: dict | None) -> None:
        self.models = models
        self.sink = sink
        self.stop = stop
        self.options = {k: v for k, v in (generation or {}).items() if k in ("max_tokens", "temperature", "top_p", "run_id", "passthrough", "stream")}
        self.attempts = 0
        self.model = models[0] if models else ""
        self.retries: list[str] = []
        self.last: UpstreamError | None = None

    def stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    def begin(self, model: str) -> None:
        """Before an attempt at `model`: raise `CompletionStopped` once stopped; else count it and start the sink's reply."""
        self.model = model
        if self.stopped():
            raise CompletionStopped(model=model, attempts=self.attempts)
        self.attempts += 1
        self.sink.start()

    def failed(self, model: str, exc: UpstreamError) -> None:
        """An attempt failed with `exc`: raise `CompletionStopped` when that was the stop's own interruption."""
        if self.stopped():
            raise CompletionStopped(model=model, attempts=self.attempts) from exc

    def retry_kwargs(self) -> dict:
        """Return tenacity's arguments of one model's attempts (`Retrying` / `AsyncRetrying`, with `before_sleep` and `sleep`)."""
        return {
            "stop": stop_after_attempt(max(settings.AGENTS_MODEL_ATTEMPTS, 1)),
            "wait": wait_equal_jitter(base=settings.AGENTS_RETRY_BASE_SECONDS, cap=settings.AGENTS_RETRY_MAX_SECONDS),
            "retry": retry_if_exception(lambda exc: isinstance(exc, UpstreamBusy) and not self.sink.delivered),
            "reraise": True,
        }

    def retrying(self, model: str, state: RetryCallState) -> tuple[str, int, str]:
        """Before a retry's wait: record its reason; return `on_retry`'s arguments."""
        reason = str(state.outcome.exception()) if state.outcome else ""
        self.retries.append(reason)
        return model, self.attempts, reason

    def busy(self, model: str, index: int, exc: UpstreamBusy) -> tuple[str, int, str] | None:
        """Every attempt at `models[index]` was busy: raise `CompletionFailed` (streamed) once the
        sink delivered text, `CompletionStopped` once stopped; else return the failover's
        `on_retry` arguments (None when no model follows)."""
        if self.sink.delivered:  # part of the reply reached the caller: a retry would write it twice
            raise CompletionFailed(reason=f"the gateway failed while the reply was being written: {exc.reason}",
                                   model=model, attempts=self.attempts, busy=True, streamed=True) from exc
        self.last = exc
        if self.stopped():
            raise CompletionStopped(model=model, attempts=self.attempts) from exc
        if index + 1 < len(self.models):
            return self.models[index + 1], self.attempts, f"failover after: {exc.reason}"
        return None

    def refused(self, model: str, exc: UpstreamError) -> CompletionFailed:
        """Return the failure of a refusal (no retry, no failover)."""
        return CompletionFailed(reason=exc.reason, model=model, attempts=self.attempts, busy=False, streamed=self.sink.delivered)

    def answered(self, completion, model: str, index: int) -> Answered:
        return Answered(completion=completion, model=model, attempts=self.attempts, failed_over=index > 0, retries=self.retries)

    def exhausted(self) -> CompletionFailed:
        """Return the failure after every model's attempts were busy."""
        tried = ", ".join(self.models)
        reason = f"{self.last.reason if self.last else 'upstream busy'} (after {self.attempts} attempts; models tried: {tried})"
        return CompletionFailed(reason=reason, model=self.models[-1], attempts=self.attempts, busy=True)


def complete(
    *,
    models: list[str],
    messages: list[dict],
    tools: list[dict] | None = None,
    timeout: Callable[[], float | None] = lambda: None,
    on_retry: Callable[[str, int, str], None] | None = None,
    sink: ReplySink | None = None,
    generation: dict | None = None,
    stop: StopSignal | None = None,
) -> Answered:
    """Return the first completion the policy obtains, trying `models` in order.

    In: `models` (primary first), the conversation, optional tool definitions, `timeout` (a
    callable giving the seconds left for one call, or None for the gateway default),
    `on_retry(model, attempt, reason)` called before each retry or failover (span events, logs),
    `sink` hearing each attempt's reply as it streams (see `ReplySink`), and `generation`
    (`max_tokens`, `temperature`, `top_p`; None values are the gateway's defaults; `run_id`, sent
    to the gateway as a header; `passthrough`, OpenAI fields sent unchanged; `stream`, False to ask
    the gateway not streamed: `chat_completion`). `stop`, the
    run's stop signal: once set, the streamed request in flight is cancelled (its socket shut
    down, the stream closed before its end), nothing is retried and no failover starts:
    `CompletionStopped` is raised (issue 25).
    Raises `CompletionFailed` carrying the last reason, the last model tried and the total
    attempts: at once for `UpstreamRefused`, after every attempt for `UpstreamBusy`, and at
    once (`streamed=True`) for a failure after the sink delivered part of the reply.
    Blocks the calling thread; `complete_async` is the same policy on an event loop.
    """
    policy = _Policy(models=models, sink=sink or ReplySink(), stop=stop, generation=generation)
    for index, model in enumerate(models):

        def call(model: str = model):
            policy.begin(model)
            try:
                with watching(stop):
                    return chat_completion(model=model, messages=messages, tools=tools, timeout=timeout(), on_delta=policy.sink.piece,
                                           **policy.options)
            except UpstreamError as exc:
                policy.failed(model, exc)
                raise

        def before_sleep(state: RetryCallState, model: str = model) -> None:
            note = policy.retrying(model, state)
            if on_retry:
                on_retry(*note)

        retrying = Retrying(
            **policy.retry_kwargs(),
            before_sleep=before_sleep,
            sleep=stop.wait if stop is not None else time.sleep,  # a stop cuts the backoff short (the next attempt refuses)
        )
        try:
            completion = retrying(call)
        except UpstreamBusy as exc:
            note = policy.busy(model, index, exc)
            if note and on_retry:
                on_retry(*note)
            continue
        except UpstreamError as exc:
            raise policy.refused(model, exc) from exc
        return policy.answered(completion, model, index)
    raise policy.exhausted()


async def complete_async(
    *,
    models: list[str],
    messages: list[dict],
    tools: list[dict] | None = None,
    timeout: Callable[[], float | None] = lambda: None,
    on_retry: Callable[[str, int, str], None] | None = None,
    sink: ReplySink | None = None,
    generation: dict | None = None,
    stop: StopSignal | None = None,
) -> Answered:
    """`complete` awaited on the running event loop: the same policy (`_Policy`: attempts, equal-jitter
    waits, failover, nothing retried once the sink delivered text), each attempt an awaited
    `chat_completion_async`, so a waiting run holds no thread.

    In: as `complete`. `timeout()` and `sink.start()` / `sink.piece(text)` are called on the
    loop (they must not block); `on_retry(model, attempt, reason)` is a plain function that may
    block (write to the database): it runs in a thread (`asyncio.to_thread`, which carries the
    caller's contextvars) and is awaited before the retry's wait. `stop` may be set from any
    thread: the attempt in flight is then cancelled at once (its HTTP request cancelled, its
    connection closed), a backoff wait is cut short, nothing is retried and no failover starts.
    Out: `Answered`, as `complete`.
    Raises `CompletionFailed` as `complete`; `CompletionStopped` (the model being asked, the
    attempts so far) once `stop` is set; `asyncio.CancelledError` when the awaiting task itself is
    cancelled (not turned into `CompletionStopped`).
    """
    policy = _Policy(models=models, sink=sink or ReplySink(), stop=stop, generation=generation)
    if stop is None:
        return await _attempts_async(policy, messages=messages, tools=tools, timeout=timeout, on_retry=on_retry)
    loop = asyncio.get_running_loop()
    task = loop.create_task(_attempts_async(policy, messages=messages, tools=tools, timeout=timeout, on_retry=on_retry))
    undo = stop.on_stop(lambda: loop.call_soon_threadsafe(task.cancel))
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if (current is not None and current.cancelling()) or not stop.is_set():
            raise  # the caller's own cancellation (the inner task was cancelled with it)
        raise CompletionStopped(model=policy.model, attempts=policy.attempts) from None
    finally:
        undo()


async def _attempts_async(policy: _Policy, *, messages: list[dict], tools: list[dict] | None, timeout: Callable[[], float | None],
                          on_retry: Callable[[str, int, str], None] | None) -> Answered:
    """`complete_async`'s attempts, model by model (the task a stop cancels)."""
    for index, model in enumerate(policy.models):

        async def call(model: str = model):
            policy.begin(model)
            try:
                return await chat_completion_async(model=model, messages=messages, tools=tools, timeout=timeout(),
                                                   on_delta=policy.sink.piece, **policy.options)
            except UpstreamError as exc:
                policy.failed(model, exc)
                raise

        async def before_sleep(state: RetryCallState, model: str = model) -> None:
            note = policy.retrying(model, state)
            if on_retry:
                await asyncio.to_thread(on_retry, *note)

        retrying = AsyncRetrying(**policy.retry_kwargs(), before_sleep=before_sleep, sleep=asyncio.sleep)
        try:
            completion = await retrying(call)
        except UpstreamBusy as exc:
            note = policy.busy(model, index, exc)
            if note and on_retry:
                await asyncio.to_thread(on_retry, *note)
            continue
        except UpstreamError as exc:
            raise policy.refused(model, exc) from exc
        return policy.answered(completion, model, index)
    raise policy.exhausted()
