"""Where the platform may send a webhook (identity agents, org endpoints) or a health probe.

The rules are `toolkit.outbound`'s, with this module's policy (`webhook_policy`): `https` to a
public address only — private, loopback, link-local, CGNAT, metadata, multicast, reserved and
unspecified addresses are refused, whether written as an IP or resolved from a name — unless
the host is listed in `AGENTS_WEBHOOK_ALLOW_HOSTS` (comma-separated host names or IPs, for local
set-ups and tests), which may then also use plain `http`. A URL is checked when it is saved (a
name that does not resolve yet is accepted then); a request resolves the name once more, checks
that answer and connects to it (`toolkit.outbound.request`), so DNS cannot point it elsewhere
between the check and the connection.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from agents_site.errors import InvalidRequest
from toolkit import outbound

MAX_URL_CHARS = 2048


class DestinationRefused(Exception):
    """The URL's address is not one the platform sends to; `str()` says why."""


def webhook_policy() -> outbound.Policy:
    """Return the outbound policy of webhook deliveries and health probes (`AGENTS_WEBHOOK_ALLOW_HOSTS`)."""
    return outbound.Policy(allow_hosts=tuple(getattr(settings, "AGENTS_WEBHOOK_ALLOW_HOSTS", []) or ()), https_only=True)


def check_destination(url: str, *, resolve: bool = True, strict_dns: bool = True) -> None:
    """Raise `DestinationRefused` unless the platform may send to `url`.

    `resolve`: also resolve a host name and refuse it if any address is not public.
    `strict_dns`: a name that does not resolve is refused (at save time it is accepted).
    """
    policy = webhook_policy()
    try:
        _, host, port = policy.check_url(url)
        if resolve and not policy.admits(host):
            policy.address(host, port)
    except outbound.Unresolved as exc:
        if strict_dns:
            raise DestinationRefused(str(exc)) from exc
    except outbound.Refused as exc:
        raise DestinationRefused(str(exc)) from exc


def clean_url(value: object, field: str, *, https_only: bool = False) -> str:
    """Return `value` trimmed if it is an acceptable destination URL ("" stays ""); else 400.

    `https_only` (avatars) refuses http even for allow-listed hosts and skips the address check.
    """
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidRequest(f"{field} must be a URL")
    url = value.strip()
    if not url:
        return ""
    if len(url) > MAX_URL_CHARS or any(c.isspace() for c in url):
        raise InvalidRequest(f"{field} is not a valid URL")
    if https_only:
        parts = urlsplit(url)
        if parts.scheme != "https" or not parts.hostname:
            raise InvalidRequest(f"{field} must be an https URL")
        return url
    try:
        check_destination(url, strict_dns=False)
    except DestinationRefused as exc:
        raise InvalidRequest(f"{field}: {exc}") from exc
    return url
