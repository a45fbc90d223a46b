"""The sandbox for the coding `run` tool on the server: the configured backend (`AGENTS_CODING_SANDBOX`).

The backends live in `toolkit.sandbox` (shared with the runner). `bubblewrap` is the only
confining backend; `none` (or a host without bubblewrap) makes the sandbox unavailable, and
coding runs then answer 503 `sandbox_unavailable`.
"""

from __future__ import annotations

from django.conf import settings

from agents_site.errors import ServiceUnavailable
from agents_site.vocabulary import ErrorCode
from toolkit.sandbox import BubblewrapSandbox, Limits, Result, SandboxBackend, Unavailable


class SandboxUnavailable(ServiceUnavailable):
    """503: no sandbox can confine the commands of a coding run; nothing was started."""

    code = ErrorCode.SANDBOX_UNAVAILABLE
    default_message = "no sandbox is available on this server for coding runs"


def get_sandbox() -> SandboxBackend:
    """Return the configured backend (it may be unavailable: check `available()`)."""
    if (settings.AGENTS_CODING_SANDBOX or "").lower() == "bubblewrap":
        return BubblewrapSandbox()
    return Unavailable("the operator disabled the coding sandbox (AGENTS_CODING_SANDBOX=none)")


def require_sandbox() -> SandboxBackend:
    """Return an available backend; raise `SandboxUnavailable` (503) naming why there is none."""
    backend = get_sandbox()
    if not backend.available():
        raise SandboxUnavailable(f"coding runs need a sandbox: {backend.unavailable_reason()}")
    return backend


def default_limits(*, timeout_seconds: float | None = None) -> Limits:
    """Return the operator's limits for one command (`AGENTS_SANDBOX_*`), `timeout_seconds` capped by them."""
    wall = float(settings.AGENTS_SANDBOX_TIMEOUT_SECONDS)
    if timeout_seconds is not None:
        wall = max(min(float(timeout_seconds), wall), 0.1)
    return Limits(
        timeout_seconds=wall,
        cpu_seconds=settings.AGENTS_SANDBOX_CPU_SECONDS,
        memory_mb=settings.AGENTS_SANDBOX_MEMORY_MB,
        output_bytes=settings.AGENTS_SANDBOX_OUTPUT_BYTES,
        file_mb=settings.AGENTS_CODING_MAX_REPO_MB,
    )


__all__ = ["Limits", "Result", "SandboxBackend", "SandboxUnavailable", "default_limits", "get_sandbox", "require_sandbox"]
