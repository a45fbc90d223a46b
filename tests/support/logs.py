"""Read a server's log for what must not be in it (issue 51 item 4)."""

from __future__ import annotations

import re

#: A line reporting a fault: a traceback, Django's uncaught-exception line, a record at ERROR or CRITICAL.
_FAULT = re.compile(r"Traceback \(most recent call last\)|Internal Server Error|^(ERROR|CRITICAL)\b|\b(ERROR|CRITICAL):")


def problems(log: str) -> list[str]:
    """Return the lines of a server log that report a fault (an expected answer must never be one)."""
    return [line for line in log.splitlines() if _FAULT.search(line)]
