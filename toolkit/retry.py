"""The backoff between attempts of one model call, for the server and the runner (reference §3.5).

429, 5xx, connection errors and empty answers are retried with equal-jitter backoff: the
server's completion policy (`agents.execution.completion`) and a machine's routed run
(`runner.execute`) wait the same way between attempts.
"""

from __future__ import annotations

import random

from tenacity import RetryCallState
from tenacity.wait import wait_base

#: The defaults both sides start from (the server's `AGENTS_MODEL_ATTEMPTS`, `AGENTS_RETRY_BASE_SECONDS`, `AGENTS_RETRY_MAX_SECONDS`).
MODEL_ATTEMPTS = 3
RETRY_BASE_SECONDS = 0.15
RETRY_MAX_SECONDS = 2.0


class wait_equal_jitter(wait_base):
    """tenacity wait: before retry n, `d/2 + uniform(0, d/2)` seconds with `d = min(base·2^(n-1), cap)`.

    Example with base 0.15 s and cap 2 s: the first retry waits 75–150 ms, the second 150–300 ms.
    """

    def __init__(self, *, base: float, cap: float) -> None:
        self.base = max(base, 0.0)
        self.cap = max(cap, 0.0)

    def __call__(self, retry_state: RetryCallState) -> float:
        exponent = max(retry_state.attempt_number - 1, 0)
        d = min(self.base * (2**exponent), self.cap)
        return d / 2 + random.uniform(0, d / 2)
