"""Where the platform may send an HTTP request for an identity agent (webhooks, health probes).

`https` to a public address only; private, loopback, link-local, multicast, reserved and
unspecified addresses are refused, whether written as an IP or resolved from a name — unless
the host is listed in `AGENTS_WEBHOOK_ALLOW_HOSTS` (comma-separated host names or IPs, for
local set-ups and tests), which may then also use plain `http`. Checked when a URL is saved
(a name that does not resolve yet is accepted then) and again before every request (DNS may
have changed).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from agents_site.errors import InvalidRequest

MAX_URL_CHARS = 2048


class DestinationRefused(Exception):
    """The URL's address is not one the platform sends to; `str()` says why."""


def _allowed_hosts() -> set[str]:
    return {h.strip().lower() for h in getattr(settings, "AGENTS_WEBHOOK_ALLOW_HOSTS", []) if h.strip()}


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def _split(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise DestinationRefused("the URL must be http(s)://host/…")
    if parts.username or parts.password:
        raise DestinationRefused("the URL must not carry credentials")
    return parts.scheme, host


def check_destination(url: str, *, resolve: bool = True, strict_dns: bool = True) -> None:
    """Raise `DestinationRefused` unless the platform may send to `url`.

    `resolve`: also resolve a host name and refuse it if any address is not public.
    `strict_dns`: a name that does not resolve is refused (at save time it is accepted).
    """
    scheme, host = _split(url)
    allowed = host in _allowed_hosts()
    if allowed:
        return
    if scheme != "https":
        raise DestinationRefused("the URL must use https")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        if not _public(literal):
            raise DestinationRefused("the URL points to a private or loopback address")
        return
    if host == "localhost" or host.endswith(".localhost"):
        raise DestinationRefused("the URL points to a private or loopback address")
    if not resolve:
        return
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        if strict_dns:
            raise DestinationRefused(f"the host {host} does not resolve") from exc
        return
    for info in infos:
        if not _public(ipaddress.ip_address(info[4][0].split("%")[0])):
            raise DestinationRefused("the URL's host resolves to a private or loopback address")


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
