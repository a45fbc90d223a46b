"""Sanitize a machine's `spec` and `metrics` before they are stored (reference §1.7).

Strings are trimmed and cut at 64 characters; numbers are clamped to their range, with
negatives, NaN and ±Inf stored as 0; `gpuUtil` is a fraction in [0, 1]; empty GPU entries are
dropped and more than 32 GPUs is refused (`InvalidRequest` "too many gpus"). Unknown keys are
dropped. An all-zero result is `{}` (no spec / no heartbeat).

Example: `{"os": " linux ", "cpus": -4, "gpus": [{}, {"model": "A100"}], "x": 1}`
→ `{"os": "linux", "gpus": [{"model": "A100"}]}`.
"""

from __future__ import annotations

import math
from typing import Any

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import FinishReason, MachineSandbox
from sessions.scanner import redact_text

MAX_STRING = 64
MAX_GPUS = 32
MAX_CPUS = 8192
MAX_INT = 2**53 - 1  # the largest integer a JavaScript client reads exactly
MAX_LOAD = 1_000_000.0


def clean_string(value: Any) -> str:
    """Return `value` as a trimmed string of at most 64 characters ("" for None/non-strings)."""
    if not isinstance(value, str):
        return ""
    return value.strip()[:MAX_STRING].strip()


def clean_number(value: Any, *, high: float, integer: bool = False) -> float | int:
    """Return `value` clamped to [0, high]; NaN, ±Inf, negatives and non-numbers become 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    try:
        number = float(value)
    except OverflowError:  # an integer past 1e308: clamp it like any other too-large number
        number = high
    if math.isnan(number) or math.isinf(number) or number < 0:
        number = 0.0
    number = min(number, high)
    return int(number) if integer else number


def _drop_zero(values: dict) -> dict:
    return {k: v for k, v in values.items() if v not in (0, 0.0, "", None, [])}


def _clean_gpu(raw: Any) -> dict:
    if not isinstance(raw, dict):
        return {}
    return _drop_zero(
        {
            "vendor": clean_string(raw.get("vendor")),
            "model": clean_string(raw.get("model")),
            "memory": clean_number(raw.get("memory"), high=MAX_INT, integer=True),
        }
    )


def clean_spec(raw: dict | None) -> dict:
    """Return the sanitized spec `{os, arch, cpus, memory, gpus: [{vendor, model, memory}], sandbox}`.

    `memory` is in bytes. Raises `InvalidRequest` ("too many gpus") for more than 32 GPUs.
    """
    if not raw:
        return {}
    gpus_raw = raw.get("gpus")
    if gpus_raw is None:
        gpus_raw = []
    if not isinstance(gpus_raw, list):  # `{}` or `""` too: only a list (or null) is a GPU list
        raise InvalidRequest("gpus must be a list")
    if len(gpus_raw) > MAX_GPUS:
        raise InvalidRequest("too many gpus")
    gpus = [gpu for gpu in (_clean_gpu(g) for g in gpus_raw) if gpu]
    return _drop_zero(
        {
            "os": clean_string(raw.get("os")),
            "arch": clean_string(raw.get("arch")),
            "cpus": clean_number(raw.get("cpus"), high=MAX_CPUS, integer=True),
            "memory": clean_number(raw.get("memory"), high=MAX_INT, integer=True),
            "gpus": gpus,
            # How the machine's runner confines coding commands: bubblewrap, none (the owner
            # accepted unsandboxed commands) or unavailable (coding `run` refused there).
            "sandbox": raw.get("sandbox") if raw.get("sandbox") in MachineSandbox.values else "",
        }
    )


def clean_metrics(raw: dict | None) -> dict:
    """Return the sanitized metrics `{load1, load5, load15, memUsed, memFree, gpuUtil}`.

    Loads are floats, memory figures bytes, `gpuUtil` a fraction in [0, 1]. The client's `at`
    is ignored: the server stamps its own clock (`metricsAt`).
    """
    if not raw:
        return {}
    return _drop_zero(
        {
            "load1": clean_number(raw.get("load1"), high=MAX_LOAD),
            "load5": clean_number(raw.get("load5"), high=MAX_LOAD),
            "load15": clean_number(raw.get("load15"), high=MAX_LOAD),
            "memUsed": clean_number(raw.get("memUsed"), high=MAX_INT, integer=True),
            "memFree": clean_number(raw.get("memFree"), high=MAX_INT, integer=True),
            "gpuUtil": clean_number(raw.get("gpuUtil"), high=1.0),
        }
    )


MAX_OUTPUT_BYTES = 512 * 1024
MAX_ERROR_BYTES = 64 * 1024
MAX_DIFFSTAT_BYTES = 64 * 1024
MAX_BRANCH = 512
MAX_COMMIT = 128
MAX_MODEL = 200
MAX_COUNT = 2**31 - 1


def _cut_bytes(value: Any, limit: int) -> str:
    if not isinstance(value, str):
        return ""
    raw = value.encode("utf-8", "replace")
    if len(raw) <= limit:
        return value
    return raw[:limit].decode("utf-8", "ignore")


MAX_STOPPED_BYTES = 4 * 1024  # a killed command's text and its output so far, each (as a server run keeps them)


def _clean_stopped_command(raw: object) -> dict | None:
    """Return a report's `stoppedCommand` `{name, command, output}` clamped and masked, or None.

    The machine's command and what it printed are its model's doing, never refused: each string
    is cut to 4 KiB and every credential in it is masked before it is stored (issue 25 item 2).
    """
    if not isinstance(raw, dict):
        return None

    def text(name: str, limit: int) -> str:
        value = _cut_bytes(raw.get(name), limit)
        return redact_text(value)[0] if value else value

    return {"name": clean_string(raw.get("name")), "command": text("command", MAX_STOPPED_BYTES), "output": text("output", MAX_STOPPED_BYTES)}


MAX_COMMITS = 500
MAX_SUBJECT_BYTES = 1024
MAX_COMMIT_DIFFSTAT_BYTES = 16 * 1024


def _clean_commits(raw: object) -> list[dict]:
    """Return a report's commits clamped: `[{sha, subject, turn, diffstat}]`, entries without a sha dropped."""
    commits = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("sha"), str) or not entry["sha"]:
            continue
        commits.append({"sha": _cut_bytes(entry["sha"], MAX_COMMIT), "subject": _cut_bytes(entry.get("subject"), MAX_SUBJECT_BYTES),
                        "turn": clean_number(entry.get("turn"), high=MAX_COUNT, integer=True),
                        "diffstat": _cut_bytes(entry.get("diffstat"), MAX_COMMIT_DIFFSTAT_BYTES)})
        if len(commits) >= MAX_COMMITS:
            break
    return commits


def clean_report(raw: dict | None, *, ok_word: str, error_word: str) -> dict:
    """Return a machine's run report clamped to its limits; a report is never refused.

    In: `{status|ok, output, error, model, promptTokens, completionTokens, toolCalls,
    durationMs, changed, pushed, branch, commitSha, diffstat, commits, summary, finishReason,
    stoppedCommand}` (any may be missing; a finishReason outside the vocabulary reads ""). Out: the same keys
    with `status` one of `ok_word`/`error_word` (`ok: true` or `status == ok_word` means ok),
    output ≤ 512 KiB, error, summary and diffstat ≤ 64 KiB, branch ≤ 512, commitSha ≤ 128 characters,
    counts clamped to [0, 2^31-1], at most 500 commits `{sha, subject, turn, diffstat}` (others
    dropped), and `stoppedCommand` `{name, command, output}` (each ≤ 4 KiB, masked) only when the
    machine sent one. A failed report with no error text gets one.
    """
    raw = raw or {}
    ok = raw.get("status") == ok_word if raw.get("status") is not None else raw.get("ok") is True

    def count(name: str) -> int:
        return clean_number(raw.get(name), high=MAX_COUNT, integer=True)

    report = {
        "status": ok_word if ok else error_word,
        "output": _cut_bytes(raw.get("output"), MAX_OUTPUT_BYTES),
        "error": _cut_bytes(raw.get("error"), MAX_ERROR_BYTES),
        "model": _cut_bytes(raw.get("model"), MAX_MODEL),
        "promptTokens": count("promptTokens"),
        "completionTokens": count("completionTokens"),
        "toolCalls": count("toolCalls"),
        "durationMs": count("durationMs"),
        "changed": raw.get("changed") is True,
        "branch": _cut_bytes(raw.get("branch"), MAX_BRANCH),
        "commitSha": _cut_bytes(raw.get("commitSha"), MAX_COMMIT),
        "diffstat": _cut_bytes(raw.get("diffstat"), MAX_DIFFSTAT_BYTES),
        # A runner that predates `pushed` pushes before it reports an ok, changed run.
        "summary": _cut_bytes(raw.get("summary"), MAX_ERROR_BYTES),
        "pushed": raw.get("pushed") is True if "pushed" in raw else (ok and raw.get("changed") is True),
        "commits": _clean_commits(raw.get("commits")),
        "finishReason": raw.get("finishReason") if raw.get("finishReason") in FinishReason.values else "",
    }
    stopped = _clean_stopped_command(raw.get("stoppedCommand"))
    if stopped is not None:
        report["stoppedCommand"] = stopped
    if not ok and not report["error"]:
        report["error"] = "the machine reported a failure without a reason"
    return report
