"""The identity WebSocket (`/v1/identity/ws`, `Authorization: Bearer agt_…`) with acknowledgements
and reconnection, on the `websockets` library (asyncio).

Envelopes arrive oldest first (those that waited included); each is handed to `on_envelope`, one
at a time, and acknowledged after it returns — also when it raised (an envelope that cannot open
never will: acknowledging it stops its redelivery). Unacknowledged envelopes come again on the
next connection, so handling must be idempotent (the replay window refuses a redelivered one as
`replayed`). A dropped connection is reopened with exponential backoff (0.5 s doubling to 30 s);
a refused or revoked token (close 4401 / 4403) ends `run()`. `send(user_id, envelope)` writes to a
user over the socket and returns the platform's `{"type": "sent", "envelope_id"}`.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import Awaitable, Callable

import websockets

CLOSE_UNAUTHORIZED = 4401
CLOSE_REVOKED = 4403
logger = logging.getLogger(__name__)


class SocketClosed(Exception):
    """The socket closed (or was never open) while a send waited for its answer."""


class AgentSocket:
    """One agent's WebSocket session (see module doc)."""

    def __init__(self, url: str, token: str, *, on_envelope: Callable[[dict], Awaitable[None]],
                 on_security_alert: Callable[[dict], Awaitable[None] | None] | None = None,
                 on_open: Callable[[], None] | None = None, min_delay: float = 0.5, max_delay: float = 30.0) -> None:
        self.url, self.token = url, token
        self.on_envelope, self.on_security_alert, self.on_open = on_envelope, on_security_alert, on_open
        self.min_delay, self.max_delay = min_delay, max_delay
        self.final_code: int | None = None
        self._ws = None
        self._stopped = False
        self._pending: collections.deque[asyncio.Future] = collections.deque()
        self.connected = asyncio.Event()

    async def run(self) -> int | None:
        """Connect and serve until `stop()` or a refused/revoked token; return the final close code."""
        delay = self.min_delay
        while not self._stopped:
            try:
                async with websockets.connect(self.url, additional_headers={"Authorization": f"Bearer {self.token}"}) as ws:
                    self._ws, delay = ws, self.min_delay
                    self.connected.set()
                    if self.on_open:
                        self.on_open()
                    await self._serve(ws)
            except websockets.ConnectionClosed as exc:
                code = exc.rcvd.code if exc.rcvd else None
                if code in (CLOSE_UNAUTHORIZED, CLOSE_REVOKED):
                    self.final_code = code
                    self._stopped = True
            except websockets.InvalidStatus as exc:  # the handshake was refused
                logger.warning("the WebSocket handshake was refused: %s", exc)
                if exc.response.status_code == 403:
                    self.final_code, self._stopped = CLOSE_UNAUTHORIZED, True
            except OSError as exc:
                logger.warning("cannot reach %s: %s", self.url, exc)
            finally:
                self._ws = None
                self.connected.clear()
                self._fail_pending()
            if not self._stopped:
                await asyncio.sleep(delay)
                delay = min(self.max_delay, delay * 2)
        return self.final_code

    async def _serve(self, ws) -> None:
        queue: asyncio.Queue = asyncio.Queue()
        worker = asyncio.create_task(self._work(ws, queue))
        try:
            async for raw in ws:
                try:
                    frame = json.loads(raw)
                except ValueError:
                    continue
                kind = frame.get("type") if isinstance(frame, dict) else None
                if kind == "envelope":
                    queue.put_nowait(frame)
                elif kind == "security_alert" and self.on_security_alert:
                    result = self.on_security_alert(frame)
                    if asyncio.iscoroutine(result):
                        await result
                elif kind in ("sent", "error") and self._pending:
                    future = self._pending.popleft()
                    if not future.done():
                        future.set_result(frame)
            if ws.close_code in (CLOSE_UNAUTHORIZED, CLOSE_REVOKED):
                self.final_code, self._stopped = ws.close_code, True
        finally:
            worker.cancel()

    async def _work(self, ws, queue: asyncio.Queue) -> None:
        while True:
            frame = await queue.get()
            try:
                await self.on_envelope(frame)
            except Exception:  # reported by the handler; acknowledged all the same
                logger.exception("handling envelope %s failed", frame.get("envelope_id"))
            try:
                await ws.send(json.dumps({"type": "ack", "envelope_ids": [frame.get("envelope_id")]}))
            except websockets.ConnectionClosed:
                return

    async def send(self, user_id: str, envelope: str) -> dict:
        """Send `user_id` an envelope over the socket; return `{"type": "sent", "envelope_id"}` or raise."""
        ws = self._ws
        if ws is None:
            raise SocketClosed("the socket is not open")
        future = asyncio.get_running_loop().create_future()
        self._pending.append(future)
        await ws.send(json.dumps({"type": "message", "user_id": user_id, "envelope": envelope}))
        answer = await future
        if answer.get("type") != "sent":
            raise SocketClosed(f"{answer.get('status')} {answer.get('code')}: {answer.get('error')}")
        return answer

    def _fail_pending(self) -> None:
        while self._pending:
            future = self._pending.popleft()
            if not future.done():
                future.set_exception(SocketClosed("the socket closed"))

    async def stop(self) -> None:
        """Close for good."""
        self._stopped = True
        if self._ws is not None:
            await self._ws.close()
