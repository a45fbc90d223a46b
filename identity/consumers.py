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
"""

from __future__ import annotations

import asyncio

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents_site.errors import ApiError
from agents_site.vocabulary import ErrorCode, SystemMessageCode, SystemMessageType
from agents_site.wire import rfc3339
from identity import live, messaging, selectors
from identity.tokens import AgentCaller, authenticate_token, credential_still_valid
from tenancy import revocation, stores

CLOSE_REVOKED = 4403
CLOSE_UNAUTHORIZED = 4401


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
            (e.id, {"type": "envelope", "envelope_id": e.public_id, "user_id": e.user_id, "envelope": e.body, "created_at": rfc3339(e.created_at)})
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
            await self.send_json({"type": str(SystemMessageType.SECURITY_ALERT), "code": str(SystemMessageCode.AGENT_TOKEN_REVOKED),
                                  "data": {"agent_id": self.caller.agent_id}})
            await self.close(code=CLOSE_REVOKED)

    async def identity_alert(self, message):
        if self.caller is not None:
            await self.send_json({"type": str(SystemMessageType.SECURITY_ALERT), "code": message.get("code"), "data": message.get("data") or {}})

    async def receive_json(self, content, **kwargs):
        if self.caller is None:
            return
        valid = await database_sync_to_async(credential_still_valid)(org_slug=self.caller.org_slug, credential_id=self.caller.credential_id)
        if not valid:
            await self.close(code=CLOSE_REVOKED)
            return
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "ack":
            ids = content.get("envelope_ids")
            count = await database_sync_to_async(_ack)(self.caller, ids if isinstance(ids, list) else [])
            await self.send_json({"type": "acked", "count": count})
        elif kind == "message":
            try:
                envelope_id = await database_sync_to_async(_send_to_user)(self.caller, content.get("user_id"), content.get("envelope"))
            except ApiError as exc:
                await self.send_json({"type": "error", **exc.body()})
                return
            await self.send_json({"type": "sent", "envelope_id": envelope_id})
        else:
            await self.send_json({"type": "error", "status": 400, "code": str(ErrorCode.INVALID_REQUEST), "error": "type must be 'ack' or 'message'"})
