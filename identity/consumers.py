"""The WebSocket of identity agents at /v1/identity/ws (spec 001, connection_mode websocket).

Authenticated by the agent token in the handshake (`Authorization: Bearer agt_…`; a bad or
missing token is refused before accepting). Then, JSON frames:

* server → agent `{"type": "envelope", "envelope_id", "user_id", "envelope", "created_at"}`:
  every unacknowledged envelope for the agent, oldest first — the backlog on connect, then
  live ones as they arrive (woken through the Channels layer, read from the store).
* agent → server `{"type": "ack", "envelope_ids": [...]}`: the envelopes were received;
  unacknowledged ones are sent again on the next connection, in order.
* agent → server `{"type": "message", "user_id", "envelope"}`: an envelope for a user (same
  rules as POST /v1/identity/users/{user_id}/messages) → `{"type": "sent", "envelope_id"}`
  or `{"type": "error", "status", "code", "error"}`.

* server → agent `{"type": "security_alert", "code", "data"}`: `agent.token_rotated` (a normal
  rotation: `data.previous_valid_until`), `agent.token_revoked` (sent just before an emergency
  rotation or a delete closes this connection).

An emergency rotation or a delete closes connections using the revoked token (code 4403), and
so does deleting the agent's org (`tenancy.revocation`, in every process);
every frame from the agent re-checks that its token is still valid.

A frame the server cannot read — binary, text that is not JSON (or nests too deep to parse),
not an object, an unpaired UTF-16 surrogate or a NUL anywhere, ids that are not
`env_<32 hex>`, a `user_id` that is not a string of 1..300 characters — is answered with an
error frame `{"type": "error", "status": 400, "code": "invalid_request", "error"}` that never
echoes the value, and the connection stays open (issue 29: never a 1011 close).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents_site.errors import ApiError, InternalError, InvalidRequest
from agents_site.vocabulary import SystemMessageCode, WsFrameType
from agents_site.wire import rfc3339, unstorable_text
from identity import live, messaging, selectors
from identity.tokens import AgentCaller, authenticate_token, credential_still_valid
from tenancy import revocation, stores

logger = logging.getLogger(__name__)

CLOSE_REVOKED = 4403
CLOSE_UNAUTHORIZED = 4401
#: An envelope's public id (`identity.messaging._new_id("env")`).
ENVELOPE_ID = re.compile(r"env_[0-9a-f]{32}")
#: At most this many ids per `ack` frame.
MAX_ACK_IDS = 500
#: A text frame larger than this is refused unread (an envelope is at most 256 KiB, base64 in JSON).
MAX_FRAME_CHARS = 512 * 1024


def read_frame(text_data: str | None, bytes_data: bytes | None) -> dict:
    """Return an agent's frame as a dict; raise `InvalidRequest` (never echoing it) when unreadable.

    In: the raw WebSocket message (text or binary). Out: the decoded JSON object, its `ack`
    ids and `message` user id checked (`ENVELOPE_ID`, a string of 1..300 characters).
    """
    if text_data is None:
        raise InvalidRequest("frames must be JSON text; binary frames are not read")
    if len(text_data) > MAX_FRAME_CHARS:
        raise InvalidRequest(f"a frame holds at most {MAX_FRAME_CHARS} characters")
    try:
        content = json.loads(text_data)
    except (ValueError, RecursionError):
        raise InvalidRequest("the frame is not valid JSON") from None
    if not isinstance(content, dict):
        raise InvalidRequest("a frame must be a JSON object")
    refusal = unstorable_text(content)
    if refusal is not None:
        raise InvalidRequest("the frame holds an unpaired UTF-16 surrogate or a NUL character")
    kind = content.get("type")
    if kind == WsFrameType.ACK:
        ids = content.get("envelope_ids")
        if not isinstance(ids, list) or len(ids) > MAX_ACK_IDS or not all(isinstance(i, str) and ENVELOPE_ID.fullmatch(i) for i in ids):
            raise InvalidRequest(f"envelope_ids must be a list of at most {MAX_ACK_IDS} envelope ids (env_ + 32 hex)")
    elif kind == WsFrameType.MESSAGE:
        user_id = content.get("user_id")
        if not isinstance(user_id, str) or not 1 <= len(user_id.strip()) <= 300:
            raise InvalidRequest("user_id must be a string of 1 to 300 characters")
    else:
        raise InvalidRequest(f"type must be '{WsFrameType.ACK}' or '{WsFrameType.MESSAGE}'")
    return content


def _token_from_scope(scope) -> str:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer":
                return token.strip()
    return ""


def _pending(caller: AgentCaller, after_id: int) -> list[tuple[int, dict]]:
    with stores.org_context(caller.org_slug, create=False):
        return [
            (e.id, {"type": WsFrameType.ENVELOPE, "envelope_id": e.public_id, "user_id": e.user_id, "envelope": e.body, "created_at": rfc3339(e.created_at)})
            for e in selectors.pending_envelopes(agent_id=caller.agent_id, after_id=after_id)
        ]


def _ack(caller: AgentCaller, ids: list) -> int:
    with stores.org_context(caller.org_slug, create=False):
        return messaging.envelopes_ack(agent_id=caller.agent_id, public_ids=ids)


def _send_to_user(caller: AgentCaller, user_id, envelope) -> str:
    with stores.org_context(caller.org_slug, create=False):
        row, _ = messaging.envelope_to_user(agent_id=caller.agent_id, user_id=str(user_id or ""), envelope=envelope)
        return row.public_id


class IdentityAgentConsumer(AsyncJsonWebsocketConsumer):
    """One identity agent's live connection (see module doc)."""

    caller: AgentCaller | None = None
    group: str | None = None
    revocation_watch: revocation.Watch | None = None
    cursor: int = 0

    async def connect(self):
        since = revocation.mark()
        try:
            self.caller = await database_sync_to_async(authenticate_token)(_token_from_scope(self.scope))
        except ApiError:
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        loop = asyncio.get_running_loop()
        # Deleting the agent's org closes this connection in whichever process holds it.
        self.revocation_watch = revocation.watch(
            [revocation.org_deleted(self.caller.org_slug)],
            lambda: loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._org_deleted())), since=since)
        self.group = live.agent_group(self.caller.org_slug, self.caller.agent_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._flush()

    async def _org_deleted(self) -> None:
        await self.close(code=CLOSE_REVOKED)

    async def disconnect(self, code):
        if self.revocation_watch is not None:
            self.revocation_watch.cancel()
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _flush(self) -> None:
        """Send every unacknowledged envelope after the cursor, oldest first."""
        while True:
            rows = await database_sync_to_async(_pending)(self.caller, self.cursor)
            for envelope_id, frame in rows:
                self.cursor = envelope_id
                await self.send_json(frame)
            if len(rows) < 100:
                return

    async def identity_wake(self, message):
        if self.caller is not None:
            await self._flush()

    async def identity_revoke(self, message):
        ids = message.get("credential_ids")
        if self.caller is not None and (ids is None or self.caller.credential_id in ids):
            await self.send_json({"type": WsFrameType.SECURITY_ALERT, "code": str(SystemMessageCode.AGENT_TOKEN_REVOKED),
                                  "data": {"agent_id": self.caller.agent_id}})
            await self.close(code=CLOSE_REVOKED)

    async def identity_alert(self, message):
        if self.caller is not None:
            await self.send_json({"type": WsFrameType.SECURITY_ALERT, "code": message.get("code"), "data": message.get("data") or {}})

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Read one frame (see `read_frame`); answer an unreadable one with an error frame."""
        if self.caller is None:
            return
        try:
            content = read_frame(text_data, bytes_data)
        except InvalidRequest as exc:
            await self.send_json({"type": WsFrameType.ERROR, **exc.body()})
            return
        try:
            await self.receive_json(content)
        except Exception:  # a fault answers this frame; the connection stays (never a 1011 close)
            logger.exception("identity WebSocket frame failed")
            await self.send_json({"type": WsFrameType.ERROR, **InternalError().body()})

    async def receive_json(self, content, **kwargs):
        """Act on one read frame: `ack` → `acked`, `message` → `sent` or an error frame."""
        if self.caller is None:
            return
        valid = await database_sync_to_async(credential_still_valid)(org_slug=self.caller.org_slug, credential_id=self.caller.credential_id)
        if not valid:
            await self.close(code=CLOSE_REVOKED)
            return
        kind = content.get("type")
        if kind == WsFrameType.ACK:
            count = await database_sync_to_async(_ack)(self.caller, content["envelope_ids"])
            await self.send_json({"type": WsFrameType.ACKED, "count": count})
        elif kind == WsFrameType.MESSAGE:
            try:
                envelope_id = await database_sync_to_async(_send_to_user)(self.caller, content.get("user_id"), content.get("envelope"))
            except ApiError as exc:
                await self.send_json({"type": WsFrameType.ERROR, **exc.body()})
                return
            await self.send_json({"type": WsFrameType.SENT, "envelope_id": envelope_id})

