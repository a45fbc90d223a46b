"""The claim-key file: one JSON file per (server, target), readable only by its user.

Layout: `{"server": URL, "targetId": "tgt_…", "claimKey": "tgtk_…"}`, mode 0600 in a 0700
directory (default `$XDG_CONFIG_HOME/agents-runner/`, else `~/.config/agents-runner/`). It is
written atomically (a private temporary file renamed into place). A file that others could
read is treated as leaked: it is not used, so the daemon mints a fresh key (superseding it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)


def default_dir() -> Path:
    """Return the directory key files live in by default."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "agents-runner"


def key_path(directory: Path, *, server: str, target_id: str) -> Path:
    """Return the key file of (server, target) inside `directory`."""
    tag = hashlib.sha256(server.rstrip("/").encode()).hexdigest()[:12]
    return directory / f"{target_id}-{tag}.json"


def load(path: Path, *, server: str, target_id: str) -> str | None:
    """Return the claim key stored at `path`, or None when absent, unreadable, foreign or exposed.

    A file whose mode lets group or others read or write it is refused (and logged).
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning("claim key file %s is readable by others; not using it (a new key will be minted)", path)
        return None
    if info.st_uid != os.getuid():
        logger.warning("claim key file %s belongs to another user; not using it", path)
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        logger.warning("claim key file %s is unreadable; a new key will be minted", path)
        return None
    if data.get("server") != server.rstrip("/") or data.get("targetId") != target_id:
        return None
    key = data.get("claimKey")
    return key if isinstance(key, str) and key else None


def save(path: Path, *, server: str, target_id: str, key: str) -> Path:
    """Write the key to `path` with mode 0600 (directory 0700), atomically; return the path."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump({"server": server.rstrip("/"), "targetId": target_id, "claimKey": key}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
