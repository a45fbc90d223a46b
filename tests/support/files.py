"""Read a database file's bytes without breaking this process's SQLite locks.

SQLite's locks are POSIX advisory locks, which belong to a process and an inode: closing *any*
file descriptor of the file drops every lock the process holds on it
(https://www.sqlite.org/howtocorrupt.html, section 2.2). A test that reads a store's file (or its
WAL) with `open()`/`read_bytes()` while the process holds connections to it silently unlocks
them; another process (a live daphne, a qcluster) then believes it is alone, checkpoints and
deletes the WAL under them, and every later test of that xdist worker fails ("disk I/O error",
rows another process committed not found: "API key unknown"). So the bytes are read by a child
process (`cat`), whose descriptors are its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def file_bytes(path: str | Path) -> bytes:
    """Return the bytes of file `path` (b"" when it does not exist), read by a child process."""
    done = subprocess.run(["cat", "--", str(path)], capture_output=True)
    return done.stdout if done.returncode == 0 else b""
