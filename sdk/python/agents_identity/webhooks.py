"""Verify a webhook delivery of the platform (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
`webhook-signature`, HMAC-SHA256 under the `whsec_` secret the agent registered) with the
`standardwebhooks` library, and return its event:

* `{"type": "envelope.created", "timestamp", "data": {envelope_id, agent_id, user_id, envelope, created_at}}`
* `{"type": "security_alert", "code", "data"}`
"""

from __future__ import annotations

from collections.abc import Mapping

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as _LibraryError


class WebhookVerificationError(Exception):
    """The delivery's signature, timestamp (5-minute tolerance) or id does not verify."""


def verify_webhook(body: bytes | str, headers: Mapping[str, str], secret: str) -> dict:
    """Return the verified event of a delivery; raise `WebhookVerificationError` otherwise."""
    flat = {k.lower(): v for k, v in headers.items()}
    try:
        return Webhook(secret).verify(body if isinstance(body, (bytes, str)) else bytes(body), flat)
    except _LibraryError as exc:
        raise WebhookVerificationError(f"the webhook does not verify: {exc}") from exc
