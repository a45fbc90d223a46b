"""What a console page's share card needs (issue 57): the subject word and the expiry choices."""

from __future__ import annotations

from django.conf import settings

#: The expiry choices offered, in days (each within AGENTS_SHARE_MAX_DAYS).
SHARE_DAY_CHOICES = (1, 7, 30, 90, 365)


def share_context(subject: str) -> dict:
    """Return `{share_subject, share_days, share_default_days}` for `console/_share_controls.html`."""
    most = settings.AGENTS_SHARE_MAX_DAYS
    default = min(settings.AGENTS_SHARE_DEFAULT_DAYS, most)
    days = sorted({d for d in SHARE_DAY_CHOICES if d <= most} | {default})
    return {"share_subject": str(subject), "share_days": days, "share_default_days": default}
