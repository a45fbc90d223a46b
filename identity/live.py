"""Live wake-ups over the Channels layer: WebSocket agents and inbox streams.

Only wake-ups travel here — the store is the source of truth. A WebSocket consumer woken for
its agent reads the agent's pending envelopes from the store; an inbox stream woken for its
user reads the user's new inbox items. A lost wake-up costs latency, not a message (streams
also re-read the store on a timer; consumers on reconnect). Group names are hashes: user ids
may hold characters the layer refuses.
"""

from __future__ import annotations

import hashlib
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

logger = logging.getLogger(__name__)

#: The consumer message type that wakes an agent's WebSocket (`identity.wake`) and the one
#: that closes connections of revoked credentials (`identity.revoke`).
WAKE = "identity.wake"
REVOKE = "identity.revoke"
ALERT = "identity.alert"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:40]


def agent_group(org: str, agent_id: str) -> str:
    """Return the layer group of agent `agent_id`'s WebSocket connections."""
    return "identity.agent." + _digest(org, agent_id)


def inbox_group(org: str, user_id: str) -> str:
    """Return the layer group of user `user_id`'s inbox streams."""
    return "identity.inbox." + _digest(org, user_id)


def _send(group: str, message: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a live wake-up must never fail a write that already committed
        logger.warning("identity live wake-up to %s failed", group, exc_info=True)


def wake_agent(org: str, agent_id: str) -> None:
    """Wake agent `agent_id`'s WebSocket connections: new envelopes are waiting."""
    _send(agent_group(org, agent_id), {"type": WAKE})


def revoke_connections(org: str, agent_id: str, credential_ids: list[int] | None) -> None:
    """Close agent `agent_id`'s WebSocket connections using `credential_ids` (None = all)."""
    _send(agent_group(org, agent_id), {"type": REVOKE, "credential_ids": credential_ids})


def alert_agent(org: str, agent_id: str, code: str, data: dict) -> None:
    """Send agent `agent_id`'s live connections a `security_alert` frame `{code, data}`."""
    _send(agent_group(org, agent_id), {"type": ALERT, "code": str(code), "data": data})


def wake_inbox(org: str, user_id: str) -> None:
    """Wake user `user_id`'s inbox streams: new items are waiting."""
    _send(inbox_group(org, user_id), {"type": WAKE})
