"""Revocation reaches open connections: close every connection a revoked credential holds, in every process.

A request is authorised once, when it starts; a connection that stays open (an SSE stream, the
claim long-poll, a streamed run/chat/OpenAI reply, a WebSocket) would otherwise outlive the
credential that opened it. So each such connection is registered here, keyed by what it was
authorised as (`principal_keys`), and a revocation fires the connection's callback:

* `("key", <api key id>)` — the API key was revoked (`tenancy.services.api_key_revoke`);
* `("member", <org slug>, <user id>)` — the user was removed from the org (every key of theirs
  there and their console sessions acting for it);
* `("org", <org slug>)` — the org was deleted (everything acting for it).

`revoke(keys)` fires the callbacks of this process at once and broadcasts the keys over the
channel layer (group `tenancy.revocations`) to every other process, whose listener fires its
own. On the in-memory layer (the embedded default) there is no broadcast; a revocation appends
to a stamp file in `AGENTS_DATA_DIR` instead, which caches of credentials (`revoked_since`) in
every process sharing that directory compare.
Callers revoke after their transaction committed (`revoke_on_commit`): a client that reconnects
then finds the credential refused.

No race between the credential check and the registration: `mark()` is taken before the check,
and a connection registered with `since=mark` is fired at once if a matching revocation arrived
(locally or from another process) after the mark. Recent revocations are kept
`RECENT_SECONDS`, far longer than a check takes.

A callback runs on whatever thread revokes (a request's thread, the listener's loop): it must
be quick and thread-safe, e.g. `loop.call_soon_threadsafe(...)`. Closing a connection never
stops a run it started: a client that leaves never stops its run (stop it through its session).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from channels import DEFAULT_CHANNEL_LAYER
import redis
from channels.layers import channel_layers
from django.conf import settings as django_settings
from django.db import transaction

logger = logging.getLogger(__name__)

GROUP = "tenancy.revocations"
MESSAGE_TYPE = "tenancy.revoke"
RECENT_SECONDS = 60.0
GROUP_REFRESH_SECONDS = 3600.0
RETRY_SECONDS = 1.0
SEND_TIMEOUT_SECONDS = 5.0

Key = tuple

_lock = threading.Lock()
_seq = itertools.count(1)
_last_seq = 0
_watches: dict[Key, set[Watch]] = {}
_recent: deque[tuple[int, float, frozenset]] = deque()


def key_revoked(api_key_id: int) -> Key:
    """Return the key of connections opened with API key `api_key_id`."""
    return ("key", int(api_key_id))


def member_removed(org_slug: str, user_id: int) -> Key:
    """Return the key of connections of user `user_id` acting for org `org_slug`."""
    return ("member", str(org_slug), int(user_id))


def org_deleted(org_slug: str) -> Key:
    """Return the key of every connection acting for org `org_slug`."""
    return ("org", str(org_slug))


def credential_changed(user_id: int) -> Key:
    """Return the key a change to user `user_id`'s keys, memberships or account is announced by.

    No connection registers it (a role change does not close connections); the API-key
    principal cache (`tenancy.principal`) does: the next request re-reads the key.
    """
    return ("credential", int(user_id))


def principal_keys(principal) -> frozenset:
    """Return the keys a connection of `principal` (a `tenancy.principal.Principal`) is closed by.

    Example: an API key principal `(org "acme", user 7, key 3)` →
    `{("org", "acme"), ("member", "acme", 7), ("key", 3)}`; a gateway JWT → `{("org", "acme")}`.
    """
    keys: set[Key] = set()
    slug = getattr(principal, "org_slug", None)
    if slug:
        keys.add(org_deleted(slug))
        if getattr(principal, "user_id", None) is not None:
            keys.add(member_removed(slug, principal.user_id))
    if getattr(principal, "api_key_id", None) is not None:
        keys.add(key_revoked(principal.api_key_id))
    return frozenset(keys)


class Watch:
    """One registered connection: its keys and the callback that closes it (fired at most once)."""

    __slots__ = ("keys", "callback", "fired", "__weakref__")

    def __init__(self, keys: frozenset, callback: Callable[[], None]) -> None:
        self.keys = keys
        self.callback = callback
        self.fired = False

    def cancel(self) -> None:
        """Unregister this connection (idempotent); call when the connection ends."""
        with _lock:
            _drop(self)

    def _fire(self) -> None:
        try:
            self.callback()
        except Exception:
            logger.warning("closing a revoked connection failed", exc_info=True)


def _drop(watch: Watch) -> None:
    for key in watch.keys:
        bucket = _watches.get(key)
        if bucket is not None:
            bucket.discard(watch)
            if not bucket:
                del _watches[key]


def mark() -> int:
    """Return the current revocation position; pass it as `since` to `watch` (see module doc)."""
    with _lock:
        return _last_seq


def watch(keys: Iterable, callback: Callable[[], None], *, since: int | None = None) -> Watch:
    """Register a connection closed by any of `keys`; return its `Watch` (cancel it at the end).

    `callback()` is called once, from any thread, when one of `keys` is revoked — at once if a
    revocation of one of them arrived after position `since` (`mark()` taken before the
    credential was checked).
    """
    entry = Watch(frozenset(keys), callback)
    _ensure_listener()
    fire = False
    with _lock:
        if since is not None:
            fire = any(seq > since and not entry.keys.isdisjoint(revoked) for seq, _, revoked in _recent)
        if fire:
            entry.fired = True
        else:
            for key in entry.keys:
                _watches.setdefault(key, set()).add(entry)
    if fire:
        entry._fire()
    return entry


def open_connections(key: Key) -> int:
    """Return how many open connections of this process `key` would close now (tests wait on it)."""
    with _lock:
        return len(_watches.get(tuple(key), ()))


def revoke_local(keys: Iterable) -> int:
    """Close this process's connections registered under any of `keys`; return how many."""
    global _last_seq
    revoked = frozenset(tuple(key) for key in keys)
    if not revoked:
        return 0
    now = time.monotonic()
    with _lock:
        _last_seq = next(_seq)
        _recent.append((_last_seq, now, revoked))
        while _recent and _recent[0][1] < now - RECENT_SECONDS:
            _recent.popleft()
        hit: list[Watch] = []
        for key in revoked:
            for entry in _watches.get(key, ()):
                if not entry.fired:
                    entry.fired = True
                    hit.append(entry)
        for entry in hit:
            _drop(entry)
    for entry in hit:
        entry._fire()
    return len(hit)


def position() -> tuple:
    """Return where revocations stand now, for `revoked_since` (take it before reading a credential).

    `(this process's position, the shared stamp)`; the stamp is read only on the in-memory layer
    (see `revoked_since`), else the shared counter in Redis.
    """
    return mark(), (_stamp() if _is_process_local() else _shared_stamp())


def revoked_since(keys: Iterable, since: tuple) -> bool:
    """Return True when something cached at `since` (`position()`) under `keys` may be stale now.

    True when one of `keys` was revoked after `since` in this process or (through the broadcast)
    another; on the in-memory layer, when any process sharing `AGENTS_DATA_DIR` revoked anything
    since (the stamp file: that layer carries no broadcast); on the Redis layer, when any process
    revoked anything since (the shared counter `SHARED_STAMP_KEY`, one GET) or this process's
    listener is not in the group (a broadcast could be missed); and when the record
    reaching back to `since` was pruned (`RECENT_SECONDS`). Cheap when nothing was revoked:
    one Redis GET (Redis layer) or one `stat` (in-memory layer).
    """
    seq, stamp = since
    if _is_process_local():
        if _stamp() != stamp:
            return True
    else:
        broadcaster = _broadcaster_instance or _broadcaster()
        if broadcaster is None or not broadcaster.joined.is_set():
            return True
        # The broadcast arrives milliseconds after the commit; the shared counter is bumped before
        # it is sent, so the next request anywhere after `revoke()` returned sees the change.
        if stamp is None or _shared_stamp() != stamp:
            return True
    if _last_seq == seq:
        return False
    wanted = frozenset(tuple(key) for key in keys)
    with _lock:
        if not _recent or _recent[0][0] > seq + 1:
            return True  # the record after `since` is gone: assume the worst
        return any(at > seq and not wanted.isdisjoint(revoked) for at, _, revoked in _recent)


#: The Redis layer's shared revocation counter, a plain key of `REDIS_URL`'s database (no cache or
#: channel prefix, so every process of the deployment reads the same one whatever its prefixes):
#: bumped by every `revoke()` before its broadcast, compared by `revoked_since`, so a cached
#: credential is refused on the very next request after a revocation in any process, not only once
#: the broadcast arrives (issue 59). Deployments sharing one Redis database share it too, which only
#: makes their caches read a row again more often.
SHARED_STAMP_KEY = "agents:revocations:stamp"
_shared_client: redis.Redis | None = None


def _shared() -> redis.Redis | None:
    """Return a client of `REDIS_URL` (made once per process), or None without one."""
    global _shared_client
    url = getattr(django_settings, "REDIS_URL", "")
    if not url:
        return None
    if _shared_client is None:
        _shared_client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    return _shared_client


def _shared_stamp():
    """Return the shared revocation counter now; None (never trusted) when it cannot be read."""
    client = _shared()
    if client is None:
        return None
    try:
        return int(client.get(SHARED_STAMP_KEY) or 0)
    except (redis.RedisError, ValueError):  # unreadable: caches serve nothing (revoked_since answers True)
        logger.warning("could not read the shared revocation counter", exc_info=True)
        return None


def _bump_shared_stamp() -> None:
    """Add one to the shared revocation counter."""
    client = _shared()
    if client is None:
        return
    try:
        client.incr(SHARED_STAMP_KEY)
    except redis.RedisError:
        logger.warning("could not bump the shared revocation counter", exc_info=True)


STAMP_NAME = "revocations.stamp"
STAMP_MAX_BYTES = 65536


def _stamp_path():
    from django.conf import settings

    return settings.AGENTS_DATA_DIR / STAMP_NAME


def _stamp() -> tuple | None:
    """Return the identity of the shared stamp file now (inode, size, mtime), or None if absent."""
    try:
        st = _stamp_path().stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _touch_stamp() -> None:
    """Append a line to the shared stamp file (replaced by a fresh file, a new inode, past `STAMP_MAX_BYTES`)."""
    path = _stamp_path()
    try:
        if path.exists() and path.stat().st_size >= STAMP_MAX_BYTES:
            fresh = path.with_name(f"{STAMP_NAME}.{_ORIGIN}")
            fresh.write_bytes(b"")
            fresh.replace(path)
        with open(path, "ab") as handle:
            handle.write(f"{time.time_ns()} {_ORIGIN}\n".encode())
    except OSError:
        logger.warning("could not stamp a revocation for other processes", exc_info=True)


def revoke(keys: Iterable) -> int:
    """Close every connection registered under any of `keys`, here and in every other process.

    Returns how many this process closed. The broadcast is best effort and never raises (a
    lost broadcast leaves the other process's connections open until they end; the credential
    is refused on their next request either way).
    """
    keys = [tuple(key) for key in keys]
    closed = revoke_local(keys)
    broadcaster = _broadcaster()
    if broadcaster is not None:
        _bump_shared_stamp()  # before the broadcast: a cache elsewhere stops serving at the next request
        broadcaster.publish(keys)
    else:  # the in-memory layer carries nothing between processes: the stamp file tells the caches
        _touch_stamp()
    return closed


def revoke_on_commit(keys: Iterable, *, using: str = "default") -> None:
    """Call `revoke(keys)` once the current transaction of `using` commits (at once outside one)."""
    keys = [tuple(key) for key in keys]
    transaction.on_commit(lambda: revoke(keys), using=using)


# --- the broadcast over the channel layer -------------------------------------------------

class _Broadcaster:
    """A daemon thread with its own loop and layer instance: joins `GROUP`, fires what arrives.

    Its own layer instance, like the session bus's (`sessions.backends.layer`): channels-redis
    allows one receiving loop per layer instance, and this one never blocks a request's loop.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.joined = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agents-revocations", daemon=True)
        self.layer = None
        self.task: asyncio.Task | None = None
        self.failures = 0  # receives that failed and were retried (logged)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.task = self.loop.create_task(self._listen())
        self.loop.run_forever()

    def stop(self) -> None:
        """Leave the group, close the layer's connections and end the thread (tests that switch layers)."""

        async def shutdown() -> None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
            close_pools = getattr(self.layer, "close_pools", None)  # channels-redis
            if close_pools is not None:
                with contextlib.suppress(Exception):
                    await close_pools()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()

    async def _listen(self) -> None:
        """Join `GROUP` and apply what other processes broadcast, until cancelled.

        One channel for the listener's life: a receive that fails (a Redis read timing out on a
        loaded host) is retried on the same channel, still in the group, so a broadcast sent
        meanwhile waits there and is applied — leaving the group, or a new channel, lost it.
        """
        self.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        channel = None
        try:
            while True:
                try:
                    if channel is None:
                        channel = await self.layer.new_channel("agents")
                    await self.layer.group_add(GROUP, channel)  # again after a failure: a no-op, or a lapsed membership renewed
                    self.joined.set()
                    refreshed = self.loop.time()
                    while True:
                        try:
                            message = await asyncio.wait_for(self.layer.receive(channel), GROUP_REFRESH_SECONDS)
                        except asyncio.TimeoutError:
                            message = None
                        if self.loop.time() - refreshed >= GROUP_REFRESH_SECONDS:  # group membership expires in the layer
                            await self.layer.group_add(GROUP, channel)
                            refreshed = self.loop.time()
                        if message and message.get("origin") != _ORIGIN:
                            revoke_local(tuple(key) for key in message.get("keys") or [])
                except asyncio.CancelledError:
                    raise
                except Exception:
                    self.joined.clear()
                    self.failures += 1
                    logger.warning("revocation listener failed; retrying", exc_info=True)
                    await asyncio.sleep(RETRY_SECONDS)
        finally:
            if channel is not None:
                with contextlib.suppress(BaseException):
                    await self.layer.group_discard(GROUP, channel)

    def publish(self, keys: list[Key]) -> None:
        message = {"type": MESSAGE_TYPE, "origin": _ORIGIN, "keys": [list(key) for key in keys]}

        async def send() -> None:
            while self.layer is None:
                await asyncio.sleep(0.01)
            await self.layer.group_send(GROUP, message)

        future = asyncio.run_coroutine_threadsafe(send(), self.loop)
        try:
            asyncio.get_running_loop()
            return  # on an event loop's own thread: never block it; the send goes on
        except RuntimeError:
            pass
        try:
            future.result(timeout=SEND_TIMEOUT_SECONDS)
        except (concurrent.futures.TimeoutError, Exception):
            logger.warning("could not broadcast a revocation to other processes", exc_info=True)


_ORIGIN = f"{time.time_ns():x}.{id(_lock):x}"  # this process: its own broadcasts are already applied
_broadcaster_lock = threading.Lock()
_broadcaster_instance: _Broadcaster | None = None
_process_local: bool | None = None


def _is_process_local() -> bool:
    global _process_local
    if _process_local is None:
        from django.conf import settings

        backend = (getattr(settings, "CHANNEL_LAYERS", {}) or {}).get(DEFAULT_CHANNEL_LAYER, {}).get("BACKEND", "")
        _process_local = not backend or backend.endswith("InMemoryChannelLayer")
    return _process_local


def _broadcaster() -> _Broadcaster | None:
    global _broadcaster_instance
    if _is_process_local():
        return None
    with _broadcaster_lock:
        if _broadcaster_instance is None:
            _broadcaster_instance = _Broadcaster()
        return _broadcaster_instance


def _ensure_listener() -> None:
    if _broadcaster_instance is None and not _is_process_local():
        _broadcaster()


def start(*, wait_seconds: float = 0.0) -> bool:
    """Start this process's listener (a server does at startup); return True once it joined.

    On the in-memory layer there is nothing to join: True at once. `wait_seconds` bounds how
    long to wait for the join (0: do not wait).
    """
    broadcaster = _broadcaster()
    if broadcaster is None:
        return True
    return broadcaster.joined.wait(wait_seconds) if wait_seconds > 0 else broadcaster.joined.is_set()


def reset() -> None:
    """Forget the layer choice and this process's registrations (tests that switch layers)."""
    global _process_local, _broadcaster_instance
    with _lock:
        _watches.clear()
        _recent.clear()
    with _broadcaster_lock:
        old, _broadcaster_instance, _process_local = _broadcaster_instance, None, None
    if old is not None:
        old.stop()
