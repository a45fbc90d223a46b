"""Per-request callbacks (issue 32 item 2): `webhook` on a run, coding or chat request.

A callback URL is admitted only when it falls under one of the org's enabled endpoints, after
normalisation: the same scheme, host and port (default ports made explicit, names lower-cased,
trailing and Unicode dots folded), no user info or fragment, and a path under the endpoint's
path at a segment boundary (`/hooks` admits `/hooks` and `/hooks/run-7`, never `/hooks-evil`).
The path is compared as `toolkit.outbound.normalised_path` reads it — percent-decoded to a fixed
point, shortest-form UTF-8 only, NFKC (full-width dots), `;` parameters dropped — and a `.` or
`..` segment, an empty segment (`//evil.com`), an encoded slash or a backslash is refused
outright (`/hooks/..;/..;/evil`, `%252e%252e`, `%C0%AE`, `．．`), so nothing climbs out of the
endpoint's path. The host is checked like every outbound host (`outbound.check_host`). The callback is signed with
that endpoint's secret. Anything else is 400 `invalid_request`. Org context required.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from agents_site.errors import InvalidRequest
from toolkit import outbound
from webhooks.destinations import MAX_URL_CHARS, webhook_policy
from webhooks.models import Endpoint

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Callback:
    """A checked callback: the URL to POST and the endpoint whose secret signs it."""

    url: str
    endpoint_pk: int


def _parts(url: str) -> tuple[str, str, int, str]:
    """Return `(scheme, host, port, normalised path)` of `url`; raise ValueError naming why it is not acceptable.

    The host is compared as `toolkit.outbound` looks it up (case, trailing dot and Unicode dots
    folded); the path is `outbound.normalised_path` (fully decoded, `;` parameters dropped, dot and
    empty segments refused).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.username is not None or parts.password is not None:
        raise ValueError("not an http(s) URL with a host")
    if parts.fragment or "#" in url:
        raise ValueError("a fragment")
    try:
        port = parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        raise ValueError("the port is not valid") from None
    try:
        path = outbound.normalised_path(parts.path or "/")
        host = outbound.check_host(parts.hostname, policy=webhook_policy())
    except outbound.Refused as exc:
        raise ValueError(str(exc)) from None
    return scheme, host, port, path


def under(url: str, endpoint_url: str) -> bool:
    """Return True when `url` falls under `endpoint_url` (same origin, normalised path at a segment boundary)."""
    try:
        scheme, host, port, path = _parts(url)
        e_scheme, e_host, e_port, e_path = _parts(endpoint_url)
    except ValueError:
        return False
    return (scheme, host, port) == (e_scheme, e_host, e_port) and outbound.path_under(path, e_path)


def resolve(url: object) -> Callback:
    """Return the checked callback for `url`, or raise `InvalidRequest` (400) naming why not."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidRequest("webhook must be a URL under one of the org's webhook endpoints")
    url = url.strip()
    if len(url) > MAX_URL_CHARS or any(c.isspace() for c in url):
        raise InvalidRequest("webhook is not a valid URL")
    try:
        _parts(url)
    except ValueError as exc:
        raise InvalidRequest(f"webhook is not an acceptable URL: {exc}") from None
    for endpoint in Endpoint.objects.filter(enabled=True).order_by("id"):
        if under(url, endpoint.url):
            return Callback(url=url, endpoint_pk=endpoint.pk)
    raise InvalidRequest("webhook must fall under one of the org's enabled webhook endpoints (same scheme, host, port and path prefix)")
