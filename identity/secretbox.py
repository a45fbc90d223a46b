"""The encrypted-at-rest secrets of identity agents: `webhooks.secretbox` (shared with org webhook endpoints)."""

from webhooks.secretbox import decrypt_secret, encrypt_secret, rotate_secret

__all__ = ["decrypt_secret", "encrypt_secret", "rotate_secret"]
