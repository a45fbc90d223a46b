"""Moved to `agents_site.secretbox` (issue 49: approval arguments, in `runs`, are sealed with it too)."""

from agents_site.secretbox import decrypt_secret, encrypt_secret, rotate_secret  # noqa: F401
