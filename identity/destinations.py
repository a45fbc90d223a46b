"""Where the platform may send an HTTP request for an identity agent: `webhooks.destinations` (shared with org webhook endpoints)."""

from webhooks.destinations import MAX_URL_CHARS, DestinationRefused, check_destination, clean_url, webhook_policy

__all__ = ["MAX_URL_CHARS", "DestinationRefused", "check_destination", "clean_url", "webhook_policy"]
