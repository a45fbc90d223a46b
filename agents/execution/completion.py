"""The spec's retry and failover policy around one chat completion (reference §3.5).

429, 5xx, connection errors and empty choices (`UpstreamBusy`) are retried up to
`AGENTS_MODEL_ATTEMPTS` (3) times per model with equal-jitter backoff; then the failover model
(`AGENTS_FAILOVER_MODEL`, when set and different) gets its own attempts. Any other failure
(`UpstreamRefused`) fails at once, with no retry and no failover. tenacity drives the loop.

Streaming (issue 12): retries and failover happen only before the first piece of the reply
has reached the caller. Each attempt is streamed into a `ReplySink`; once the sink says it
has delivered text (`delivered`), a failure of that attempt is final: no retry, no failover,
`CompletionFailed.streamed` is True and the run ends `error` keeping what was written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from agents.inference import UpstreamBusy, UpstreamError, chat_completion
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
    to the gateway as a header; `passthrough`, OpenAI fields sent unchanged: `chat_completion`). `stop`, the
    run's stop signal: once set, the streamed request in flight is cancelled (its socket shut
    down, the stream closed before its end), nothing is retried and no failover starts:
    `CompletionStopped` is raised (issue 25).
    Raises `CompletionFailed` carrying the last reason, the last model tried and the total
    attempts: at once for `UpstreamRefused`, after every attempt for `UpstreamBusy`, and at
    once (`streamed=True`) for a failure after the sink delivered part of the reply.
    """
    sink = sink or ReplySink()
    options = {k: v for k, v in (generation or {}).items() if k in ("max_tokens", "temperature", "top_p", "run_id", "passthrough")}
    attempts = 0
    retries: list[str] = []
    last: UpstreamError | None = None
    for index, model in enumerate(models):

        def call(model: str = model):
            nonlocal attempts
            if stop is not None and stop.is_set():
                raise CompletionStopped(model=model, attempts=attempts)
            attempts += 1
            sink.start()
            try:
                with watching(stop):
                    return chat_completion(model=model, messages=messages, tools=tools, timeout=timeout(), on_delta=sink.piece, **options)
            except UpstreamError as exc:
                if stop is not None and stop.is_set():  # the failure is the stop's own interruption
                    raise CompletionStopped(model=model, attempts=attempts) from exc
                raise

        def before_sleep(state: RetryCallState, model: str = model) -> None:
            reason = str(state.outcome.exception()) if state.outcome else ""
            retries.append(reason)
            if on_retry:
                on_retry(model, attempts, reason)

        retrying = Retrying(
            stop=stop_after_attempt(max(settings.AGENTS_MODEL_ATTEMPTS, 1)),
            wait=wait_equal_jitter(base=settings.AGENTS_RETRY_BASE_SECONDS, cap=settings.AGENTS_RETRY_MAX_SECONDS),
            retry=retry_if_exception(lambda exc: isinstance(exc, UpstreamBusy) and not sink.delivered),
            before_sleep=before_sleep,
            sleep=stop.wait if stop is not None else time.sleep,  # a stop cuts the backoff short (the next attempt refuses)
            reraise=True,
        )
        try:
            completion = retrying(call)
        except UpstreamBusy as exc:
            if sink.delivered:  # part of the reply reached the caller: a retry would write it twice
                raise CompletionFailed(reason=f"the gateway failed while the reply was being written: {exc.reason}",
                                       model=model, attempts=attempts, busy=True, streamed=True) from exc
            last = exc
            if stop is not None and stop.is_set():
                raise CompletionStopped(model=model, attempts=attempts) from exc
            if index + 1 < len(models) and on_retry:
                on_retry(models[index + 1], attempts, f"failover after: {exc.reason}")
            continue
        except UpstreamError as exc:
            raise CompletionFailed(reason=exc.reason, model=model, attempts=attempts, busy=False, streamed=sink.delivered) from exc
        return Answered(completion=completion, model=model, attempts=attempts, failed_over=index > 0, retries=retries)
    tried = ", ".join(models)
    reason = f"{last.reason if last else 'upstream busy'} (after {attempts} attempts; models tried: {tried})"
    raise CompletionFailed(reason=reason, model=models[-1], attempts=attempts, busy=True)
