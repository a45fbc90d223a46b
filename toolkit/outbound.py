"""The one door for HTTP requests the platform makes to addresses a user named (issue 29 item 4).

Webhook deliveries and health probes, the `http_get` tool, MCP servers and git over https all
reach URLs an org member (or a model) chose. Each goes through this module, which:

1. **checks the URL**: `http` or `https`, a host, no user or password in it; with
   `Policy.https_only`, plain `http` only for a host the allow-list admits;
2. **resolves the host once**, when the connection is opened, and refuses it when *any* answer
   is not a public address — loopback, private (RFC 1918, ULA), link-local, carrier-grade NAT
   (100.64/10), cloud metadata (169.254.169.254, fd00:ec2::254, 100.100.100.200), multicast,
   reserved, unspecified or otherwise not global — unless the request's own allow-list admits
   the host (`Policy.allow_hosts`);
3. **connects to that checked address** — the connection is opened to the IP the check saw, while
   the request keeps its `Host` header and TLS keeps the name for SNI and certificate checks
   (an httpx transport whose network backend resolves through the policy), so a second DNS
   answer (rebinding) is never used;
4. **re-checks every hop**: a redirect is followed only when the caller asks, and each hop is
   checked as in 1–3 (a redirect to 127.0.0.1 is refused);
5. **bounds the exchange**: a total time (`timeout` seconds) and a body size (`max_bytes`).

No proxy from the environment is used (it would connect elsewhere than the checked address).
Settings are the caller's: it builds a `Policy` from its own allow-list setting
(`AGENTS_WEBHOOK_ALLOW_HOSTS`, `AGENTS_TOOL_HTTP_ALLOW`, `AGENTS_MCP_ALLOW_HOSTS`,
`AGENTS_REPO_ALLOW_HOSTS`). The model gateway (`INFERENCE_BASE_URL`) is operator configuration
and does not go through here.

The API:

- `Policy(allow_hosts=(…), https_only=False)` — what one kind of request may reach;
  `policy.check_url(url)`, `policy.address(host, port)` (resolve once and check: the IP to
  connect to; git pins it with `http.curloptResolve`).
- `request(policy, method, url, …) -> Response` — one bounded exchange (blocking);
  `keep_alive=True` sends it on a connection kept open for the address the request checked
  (`KeepAlive`: webhook drains), never one opened to another answer.
- `async_client(policy, …) -> httpx2.AsyncClient` — for an SDK that makes its own requests
  (the MCP SDK): every connection it opens is checked and pinned the same way.
- `Refused` (the destination is not allowed: say so, send nothing; `Unresolved` when the
  name does not resolve), `Failed` (the exchange failed: network, TLS, protocol), `TimedOut`
  (a `Failed`: the time bound passed).

Allow-list entries are host names or IP addresses, compared case-insensitively without a
trailing dot; an entry `*.example.com` admits every subdomain of example.com (not example.com
itself). An entry admits exactly the host it names, whatever that host resolves to.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes, urlsplit

import anyio
import httpcore2
import httpx2

DEFAULT_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_BYTES = 1024 * 1024
MAX_REDIRECTS = 5
USER_AGENT = "agents-outbound/1"

Resolver = Callable[[str, int], list[str]]

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_METADATA = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"))


class Refused(Exception):
    """The destination is not one this request may reach; `str()` says why. Nothing was sent."""


class Unresolved(Refused):
    """The host name does not resolve (a `Refused`: nothing was sent)."""


class Failed(Exception):
    """The exchange failed (connection, TLS, protocol); `str()` is a short reason."""


class TimedOut(Failed):
    """The exchange did not finish within its time bound."""


def system_resolver(host: str, port: int) -> list[str]:
    """Return the addresses `host` resolves to for TCP on `port`, in the resolver's order, once each.

    Raises `Refused` when the name does not resolve.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unresolved(f"the host {host} does not resolve") from exc
    addresses: list[str] = []
    for info in infos:
        address = str(info[4][0]).split("%")[0]
        if address not in addresses:
            addresses.append(address)
    return addresses


# Characters IDNA (UTS #46) maps to a label separator: a host written with them is the dotted host.
_UNICODE_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def _bare(host: str) -> str:
    """Return `host` as compared and looked up: trimmed, unbracketed, NFKC, lower case, Unicode dots as
    `.`, no trailing dot (`"LOCALHOST."` → `"localhost"`, `"127\u30020\u30020\u30021"` → `"127.0.0.1"`)."""
    text = unicodedata.normalize("NFKC", (host or "").strip().strip("[]")).translate(_UNICODE_DOTS)
    return text.lower().rstrip(".")


_LEGACY_IPV4 = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$")


def _legacy_ipv4(text: str) -> ipaddress.IPv4Address | None:
    """Return the IPv4 address C's `inet_aton` (and so curl, git and browsers) reads in `text`, else None.

    The forms a dotted quad is not: one number (`2130706433`), hex (`0x7f000001`, `0xa9.0xfe.…`),
    octal parts (`0177.0.0.1`), fewer parts (`127.1`, `10.1.2`). The last part fills the bytes left.
    """
    if not _LEGACY_IPV4.match(text):
        return None
    values = []
    for part in text.split("."):
        try:
            if part.startswith("0x"):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            else:
                values.append(int(part, 10))
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (4 - len(head)) + last
    return ipaddress.IPv4Address(number)


def host_matches(entries: Iterable[str], host: str) -> bool:
    """Return True when allow-list `entries` name `host` (exact, an equal IP, or `*.domain` for a subdomain).

    Example: `["api.example.com", "*.corp.test", "10.0.0.5"]` admits `api.example.com`,
    `git.corp.test` and `10.0.0.5`; not `example.com`, `corp.test` or `api.example.com.evil`.
    """
    name = _bare(host)
    if not name:
        return False
    literal = _ip(name)
    for raw in entries:
        entry = _bare(raw)
        if not entry:
            continue
        if entry.startswith("*."):
            if name.endswith(entry[1:]) and len(name) > len(entry) - 1:
                return True
        elif entry == name or (literal is not None and _ip(entry) == literal):
            return True
    return False


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Return the IP address `text` denotes (dotted quad, IPv6, or an `inet_aton` form), else None."""
    bare = _bare(text).split("%")[0]
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        return _legacy_ipv4(bare)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are the IPv4
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated `::a.b.c.d` (:: and ::1 excepted)
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # SIIT `::ffff:0:a.b.c.d`


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """Return `(IPv4 address, form)` an IPv6 address carries and delivers to, or None.

    Forms: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`), IPv4-compatible
    (`::a.b.c.d`), 6to4 (`2002:AABB:CCDD::/48`), NAT64 (`64:ff9b::/96`) and Teredo (`2001::/32`,
    the client address, de-obfuscated). Example: `2002:7f00:1::1` → `(127.0.0.1, "6to4")`.
    """
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "IPv4-mapped"
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _IPV4_TRANSLATED:
        return low32, "IPv4-translated"
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        return low32, "IPv4-compatible"
    if ip.sixtofour is not None:
        return ip.sixtofour, "6to4"
    if ip in _NAT64:
        return low32, "NAT64"
    if ip.teredo is not None:
        return ip.teredo[1], "Teredo"
    return None


def _ipv4_reason(ip: ipaddress.IPv4Address) -> str:
    if ip in _METADATA:
        return "cloud metadata"
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:
        return "link-local"
    if ip in _CGNAT:
        return "carrier-grade NAT"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if ip.is_reserved or not ip.is_global:
        return "reserved"
    return ""


def refused_reason(address: str) -> str:
    """Return why the platform does not connect to IP `address` ("" when it is a public address).

    Example: `"127.0.0.1"` → `"loopback"`, `"100.64.1.1"` → `"carrier-grade NAT"`,
    `"169.254.169.254"` → `"cloud metadata"`, `"8.8.8.8"` → `""`. An IPv6 address carrying an
    IPv4 address (`embedded_ipv4`) is refused when that IPv4 address is, with the form named:
    `"2002:7f00:1::1"` → `"loopback (6to4)"`; it is then judged as itself as well
    (`"64:ff9b::808:808"` → `"reserved"`). `inet_aton` forms count as the address they denote
    (`"2130706433"` → `"loopback"`).
    """
    ip = _ip(address)
    if ip is None:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv4Address):
        return _ipv4_reason(ip)
    embedded = embedded_ipv4(ip)
    if embedded is not None:
        carried, form = embedded
        reason = _ipv4_reason(carried)
        if reason:
            return reason if form == "IPv4-mapped" else f"{reason} ({form})"
    if ip in _METADATA:
        return "cloud metadata"
    if ip.is_loopback:
        return "loopback"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if ip.is_reserved or not ip.is_global:
        return "reserved"
    return ""


def check_host(host: str, *, policy: "Policy | None" = None) -> str:
    """Return `host` normalised (`_bare`) when its written form may be reached; else raise `Refused`.

    Does not resolve. Refused: an empty host, `localhost` and `*.localhost` (any case, trailing
    dot, Unicode dots), and a literal address (any form `_ip` reads) that `refused_reason` refuses
    — unless `policy` admits the host. Example: `"0xa9fea9fe"` → `Refused("0xa9fea9fe is a cloud
    metadata address")`; `"Example.COM."` → `"example.com"`.
    """
    name = _bare(host)
    if not name:
        raise Refused("the URL names no host")
    if policy is not None and policy.admits(name):
        return name
    if name == "localhost" or name.endswith(".localhost"):
        raise Refused(f"{name} is a loopback name")
    if _ip(name) is not None and (reason := refused_reason(name)):
        raise Refused(f"{name} is a {reason} address")
    return name


# --- paths under a prefix ----------------------------------------------------------------------

MAX_DECODE_ROUNDS = 3


def normalised_path(raw: str) -> str:
    """Return URL path `raw` as a server may finally read it, or raise `Refused` naming what is wrong.

    Percent-decoding is repeated to a fixed point (at most `MAX_DECODE_ROUNDS` rounds: `%252e`
    → `%2e` → `.`); the bytes must be valid, shortest-form UTF-8 (`%C0%AE`, an overlong `.`, is
    refused); the text is NFKC-normalised (full-width `．` and `／` become `.` and `/`); each
    segment's `;` parameters are dropped (`..;x` is `..`). Refused after that: a `.` or `..`
    segment, an empty segment inside the path (`/a//b`, a `//host` authority), a backslash, a
    control character, an encoded `/` or a backslash. Example: `"/hooks/%2e%2e;/evil"` → refused ("a dot
    segment"); `"/hooks/run-7/"` → `"/hooks/run-7/"`.
    """
    text = raw or "/"
    lowered = text.lower()
    if "%2f" in lowered or "%5c" in lowered or "\\" in text:
        raise Refused("an encoded slash or a backslash in the path")
    for _ in range(MAX_DECODE_ROUNDS + 1):
        try:
            decoded = unquote_to_bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise Refused("the path is not valid UTF-8 (an overlong or broken percent-encoding)") from None
        if decoded == text:
            break
        text = decoded
        if "\\" in text or "%2f" in text.lower() or "%5c" in text.lower():
            raise Refused("an encoded slash or a backslash in the path")
    else:
        raise Refused("the path is percent-encoded too many times")
    text = unicodedata.normalize("NFKC", text).translate(_UNICODE_DOTS)
    if "\\" in text or any(unicodedata.category(c) == "Cc" for c in text):
        raise Refused("a backslash or a control character in the path")
    if not text.startswith("/"):
        text = "/" + text
    segments = [segment.split(";", 1)[0] for segment in text.split("/")]
    if any(segment in (".", "..") for segment in segments):
        raise Refused("a dot segment in the path")
    if any(segment == "" for segment in segments[1:-1]):
        raise Refused("an empty segment in the path (//)")
    return "/".join(segments)


def path_under(path: str, prefix: str) -> bool:
    """Return True when normalised `path` is `prefix` or below it at a segment boundary.

    Both are `normalised_path` results. Example: prefix `/hooks` admits `/hooks` and `/hooks/run-7`,
    never `/hooks-evil`; prefix `/` admits every path.
    """
    base = prefix.rstrip("/")
    return not base or path == base or path.startswith(base + "/")


@dataclass(frozen=True)
class Policy:
    """What one kind of outbound request may reach.

    `allow_hosts`: hosts admitted even when they are (or resolve to) a non-public address (and,
    with `https_only`, over plain http). `resolver(host, port) -> [ip, …]` looks names up
    (None: this module's `system_resolver`, looked up at each call).
    """

    allow_hosts: tuple[str, ...] = ()
    https_only: bool = False
    resolver: Resolver | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_hosts", tuple(h for h in (self.allow_hosts or ()) if str(h).strip()))

    def admits(self, host: str) -> bool:
        """Return True when the allow-list names `host`."""
        return host_matches(self.allow_hosts, host)

    def check_url(self, url: str) -> tuple[str, str, int]:
        """Return `(scheme, host, port)` of `url` when its shape may be requested; else raise `Refused`.

        Does not resolve: the address is checked when the connection opens (`address`). A
        literal IP and `localhost` names are judged here already.
        """
        try:
            parts = urlsplit(str(url))
            port = parts.port
        except ValueError as exc:
            raise Refused("the URL is not valid") from exc
        scheme, host = parts.scheme.lower(), _bare(parts.hostname or "")
        if scheme not in ("http", "https") or not host:
            raise Refused("the URL must be http(s)://host/…")
        if parts.username or parts.password:
            raise Refused("the URL must not carry credentials")
        admitted = self.admits(host)
        if self.https_only and scheme != "https" and not admitted:
            raise Refused("the URL must use https")
        host = check_host(host, policy=self)
        return scheme, host, port or (443 if scheme == "https" else 80)

    def address(self, host: str, port: int) -> str:
        """Resolve `host` once and return the address to connect to: the first answer, every answer checked.

        An admitted host may resolve anywhere. Raises `Refused` when the name does not resolve
        or any answer is not a public address.
        """
        name = check_host(host, policy=self)
        if _ip(name) is not None:
            addresses = [str(_ip(name))]
        else:
            addresses = list((self.resolver or system_resolver)(name, port))
        if not addresses:
            raise Unresolved(f"the host {name} does not resolve")
        if not self.admits(name):
            for address in addresses:
                reason = refused_reason(address)
                if reason and _ip(address) == _ip(name):
                    raise Refused(f"{name} is a {reason} address")
                if reason:
                    raise Refused(f"{name} resolves to {address}, a {reason} address")
        return addresses[0]


# --- the pinned transport -------------------------------------------------------------------


class _PinnedBackend(httpcore2.NetworkBackend):
    """httpcore's network backend: connect to `policy.address(host, port)` instead of resolving again."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.inner = httpcore2.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return self.inner.connect_tcp(self.policy.address(host, port), port, timeout, local_address, socket_options)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):  # pragma: no cover - never configured
        raise Refused("unix sockets are not an outbound destination")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _AsyncPinnedBackend(httpcore2.AsyncNetworkBackend):
    """The async twin of `_PinnedBackend` (the lookup runs on a worker thread)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        address = await anyio.to_thread.run_sync(self.policy.address, host, port)
        return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):  # pragma: no cover - never configured
        raise Refused("unix sockets are not an outbound destination")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


_contexts: dict[bool | str, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def ssl_context(verify=True) -> ssl.SSLContext:
    """Return the TLS context of `verify`: True, the default CA bundle; False, no certificate
    checks; an `ssl.SSLContext`, itself (a CA bundle path is deprecated by httpx, but works).

    Built once per process for each True/False/path value and shared (an `SSLContext` is safe to
    use from many threads): loading the CA bundle costs tens of milliseconds of CPU, and each
    request used to build two — the bulk of a webhook attempt's CPU, on cores the runs share.
    """
    if isinstance(verify, ssl.SSLContext):
        return verify
    with _contexts_lock:
        context = _contexts.get(verify)
        if context is None:
            context = _contexts[verify] = httpx2.create_ssl_context(verify=verify, trust_env=False)
        return context


def _pool_options(context: ssl.SSLContext) -> dict:
    # httpx2's transports build their httpcore pool without a network backend parameter; the
    # pool is rebuilt with the same options plus ours (tests/toolkit/test_outbound.py fails if
    # httpx2 stops reading `_pool`, since the rebinding test would then reach the second answer).
    return {"ssl_context": context, "max_connections": 10, "max_keepalive_connections": 5}


class PinnedTransport(httpx2.HTTPTransport):
    """An httpx2 transport whose every connection goes to the address `policy` checked (Host and SNI kept)."""

    def __init__(self, policy: Policy, *, verify=True) -> None:
        context = ssl_context(verify)
        super().__init__(verify=context, trust_env=False)
        self._pool = httpcore2.ConnectionPool(network_backend=_PinnedBackend(policy), **_pool_options(context))


class AsyncPinnedTransport(httpx2.AsyncHTTPTransport):
    """The async `PinnedTransport`."""

    def __init__(self, policy: Policy, *, verify=True) -> None:
        context = ssl_context(verify)
        super().__init__(verify=context, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(network_backend=_AsyncPinnedBackend(policy), **_pool_options(context))


def _hook(policy: Policy):
    def check(request: httpx2.Request) -> None:
        policy.check_url(str(request.url))

    return check


def _async_hook(policy: Policy):
    async def check(request: httpx2.Request) -> None:
        policy.check_url(str(request.url))

    return check


def async_client(policy: Policy, *, timeout: float = DEFAULT_TIMEOUT_SECONDS, headers: Mapping[str, str] | None = None,
                 read_timeout: float | None = None, verify=True) -> httpx2.AsyncClient:
    """Return an `httpx2.AsyncClient` whose every request is checked and pinned by `policy`.

    For SDKs that make their own requests (the MCP SDK's `streamable_http_client(url,
    http_client=…)`). `timeout` bounds connect/write/pool (and reads unless `read_timeout`).
    Redirects are off; a hop an SDK follows itself is checked again. Close it (`async with`).
    A refused destination raises `Refused` from the request.
    """
    return httpx2.AsyncClient(
        transport=AsyncPinnedTransport(policy, verify=verify), trust_env=False, follow_redirects=False,
        timeout=httpx2.Timeout(timeout, read=read_timeout if read_timeout is not None else timeout),
        headers={"user-agent": USER_AGENT, **dict(headers or {})}, event_hooks={"request": [_async_hook(policy)]},
    )


# --- one bounded exchange ---------------------------------------------------------------------


@dataclass
class Response:
    """What came back: status, headers (lower-case names), at most `max_bytes` of body, the final URL."""

    status_code: int
    headers: dict[str, str]
    content: bytes
    truncated: bool
    url: str
    encoding: str = "utf-8"

    @property
    def is_redirect(self) -> bool:
        """True for a 3xx answer carrying a `location` (one the caller did not follow)."""
        return 300 <= self.status_code < 400 and "location" in self.headers

    def text(self) -> str:
        """Return the body decoded with the answer's charset (invalid bytes replaced)."""
        return self.content.decode(self.encoding or "utf-8", errors="replace")


def request(policy: Policy, method: str, url: str, *, headers: Mapping[str, str] | None = None, content: bytes | None = None,
            timeout: float = DEFAULT_TIMEOUT_SECONDS, max_bytes: int = DEFAULT_MAX_BYTES, follow_redirects: bool = False,
            verify=True, keep_alive: bool = False) -> Response:
    """Make one request under `policy` and return the `Response` (blocking).

    `timeout` (seconds) bounds the whole exchange, redirects included; the body is read up to
    `max_bytes` bytes (`truncated` says more was sent). With `follow_redirects`, up to
    `MAX_REDIRECTS` hops are followed, each checked again; otherwise a 3xx is returned as is.
    `keep_alive` (no redirects followed): the name is resolved and checked now, and the request
    goes on an idle connection already open to that very address (scheme, host, port), or a new
    one to it that is kept for the next request (`KeepAlive`); a different answer next time
    never reuses a connection to the old address.
    Raises `Refused` (nothing sent to a refused address), `TimedOut` or `Failed`.
    """
    scheme, host, port = policy.check_url(url)
    deadline = time.monotonic() + max(float(timeout), 0.1)
    if keep_alive and not follow_redirects and not isinstance(verify, ssl.SSLContext):
        address = policy.address(host, port)  # resolved and checked once, before anything is sent
        with kept.client(scheme, host, port, address, verify) as client:
            return _exchange(client, method, url, headers=headers, content=content, timeout=timeout, max_bytes=max_bytes,
                             deadline=deadline)
    with httpx2.Client(transport=PinnedTransport(policy, verify=verify), trust_env=False, follow_redirects=follow_redirects,
                       max_redirects=MAX_REDIRECTS, timeout=max(float(timeout), 0.1),
                       headers={"user-agent": USER_AGENT, "accept-encoding": "identity"},
                       event_hooks={"request": [_hook(policy)]}) as client:
        return _exchange(client, method, url, headers=headers, content=content, timeout=timeout, max_bytes=max_bytes, deadline=deadline)


def _exchange(client: httpx2.Client, method: str, url: str, *, headers, content, timeout: float, max_bytes: int,
              deadline: float) -> Response:
    """Send one request on `client`, read at most `max_bytes` of the answer by `deadline` (monotonic s)."""
    try:
        with client.stream(method, url, headers=dict(headers or {}), content=content, timeout=max(float(timeout), 0.1)) as answer:
            body = bytearray()
            truncated = False
            for chunk in answer.iter_bytes():
                body.extend(chunk[: max_bytes - len(body)])
                if len(body) >= max_bytes:
                    truncated = True  # the rest is unread: the connection is closed, never reused
                    break
                if time.monotonic() > deadline:
                    raise TimedOut(f"no complete answer within {timeout:g} s")
            return Response(status_code=answer.status_code, headers={k.lower(): v for k, v in answer.headers.items()},
                            content=bytes(body), truncated=truncated, url=str(answer.url), encoding=answer.encoding or "utf-8")
    except httpx2.TimeoutException as exc:
        raise TimedOut(f"no answer within {timeout:g} s") from exc
    except httpx2.TooManyRedirects as exc:
        raise Failed(f"more than {MAX_REDIRECTS} redirects") from exc
    except httpx2.HTTPError as exc:
        raise Failed(f"{type(exc).__name__}: {exc}"[:300]) from exc


# --- connections kept open to a checked address ------------------------------------------------

#: An idle kept connection is closed after this many seconds (under the 2 s of the shortest common
#: server keep-alive, gunicorn's; one the receiver closed sooner is seen closed and not reused).
KEEPALIVE_SECONDS = 1.5
KEEPALIVE_PER_ADDRESS = 4  # idle connections kept to one (scheme, host, port, address)
KEEPALIVE_DESTINATIONS = 64  # destinations with kept connections in one process (least recently used out)
MAX_CONNECTIONS_PER_ADDRESS = 8  # open at once to one destination through `KeepAlive` (more wait, within the timeout)


class _FixedBackend(httpcore2.NetworkBackend):
    """httpcore's network backend of one destination: every connection goes to `address`, the
    answer checked for (`host`, `port`). `KeepAlive` hands its client only to requests for that
    destination; a connection asked for another port is refused all the same (the host is not
    compared: httpcore names it in its IDNA form, the check in its Unicode one)."""

    def __init__(self, host: str, port: int, address: str) -> None:
        self.host, self.port, self.address = host, port, address
        self.inner = httpcore2.SyncBackend()

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        if port != self.port:
            raise Refused(f"a connection kept for {self.host}:{self.port} is not one to {host}:{port}")
        return self.inner.connect_tcp(self.address, port, timeout, local_address, socket_options)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):  # pragma: no cover - never configured
        raise Refused("unix sockets are not an outbound destination")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _Kept:
    """One destination's client, how many requests use it now, and whether it is to close when they end."""

    def __init__(self, client: httpx2.Client) -> None:
        self.client, self.users, self.retired = client, 0, False


class KeepAlive:
    """Connections kept open per checked destination `(scheme, host, port, address, verify)`.

    `client(scheme, host, port, address, verify)` is a context manager yielding the `httpx2.Client`
    of that destination, whose every connection goes to `address` (`_FixedBackend`; Host and SNI
    keep the name). A destination's idle connections are reused (at most `KEEPALIVE_PER_ADDRESS`,
    for `KEEPALIVE_SECONDS`; one the receiver closed is seen closed and replaced). When the same
    (scheme, host, port) is checked to another address, the old address's client is retired:
    closed once no request uses it, never handed out again. Thread-safe; emptied in a forked
    child (the parent's sockets are not the child's to use).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple, _Kept] = OrderedDict()
        self._current: dict[tuple, str] = {}  # (scheme, host, port, verify) → the address last checked

    def client(self, scheme: str, host: str, port: int, address: str, verify=True):
        return _Lease(self, scheme, host, port, address, verify)

    def _take(self, scheme: str, host: str, port: int, address: str, verify) -> _Kept:
        destination = (scheme, host, port, verify)
        closing = []
        with self._lock:
            if self._current.get(destination, address) != address:
                for key in [k for k in self._kept if k[:4] == destination and k[4] != address]:
                    closing += self._retire(key)
            self._current[destination] = address
            key = (*destination, address)
            entry = self._kept.get(key)
            if entry is None:
                entry = self._kept[key] = _Kept(self._new_client(scheme, host, port, address, verify))
            self._kept.move_to_end(key)
            entry.users += 1
            while len(self._kept) > KEEPALIVE_DESTINATIONS:
                closing += self._retire(next(iter(self._kept)))
        for client in closing:
            client.close()
        return entry

    def _give(self, entry: _Kept) -> None:
        with self._lock:
            entry.users -= 1
            close = entry.retired and entry.users == 0
        if close:
            entry.client.close()

    def _retire(self, key: tuple) -> list[httpx2.Client]:
        """Drop `key`'s client (`_lock` held); return it to close now when no request uses it."""
        entry = self._kept.pop(key)
        entry.retired = True
        return [entry.client] if entry.users == 0 else []

    @staticmethod
    def _new_client(scheme: str, host: str, port: int, address: str, verify) -> httpx2.Client:
        context = ssl_context(verify)
        transport = httpx2.HTTPTransport(verify=context, trust_env=False)
        transport._pool = httpcore2.ConnectionPool(  # see _pool_options: the pool is rebuilt with our backend
            network_backend=_FixedBackend(host, port, address), ssl_context=context, max_connections=MAX_CONNECTIONS_PER_ADDRESS,
            max_keepalive_connections=KEEPALIVE_PER_ADDRESS, keepalive_expiry=KEEPALIVE_SECONDS)
        return httpx2.Client(transport=transport, trust_env=False, follow_redirects=False,
                             headers={"user-agent": USER_AGENT, "accept-encoding": "identity"})

    def destinations(self) -> list[tuple]:
        """Return the kept `(scheme, host, port, verify, address)` keys, least recently used first (tests)."""
        with self._lock:
            return list(self._kept)

    def close(self) -> None:
        """Close every kept connection (tests; a request still running finishes on its own)."""
        with self._lock:
            keys = list(self._kept)
            closing = [client for key in keys for client in self._retire(key)]
            self._current.clear()
        for client in closing:
            client.close()

    def forget(self) -> None:
        """Drop every kept connection without closing it (a forked child: the sockets are the parent's)."""
        self._lock = threading.Lock()
        self._kept = OrderedDict()
        self._current = {}


class _Lease:
    def __init__(self, pool: KeepAlive, *destination) -> None:
        self.pool, self.destination, self.entry = pool, destination, None

    def __enter__(self) -> httpx2.Client:
        self.entry = self.pool._take(*self.destination)
        return self.entry.client

    def __exit__(self, *exc) -> None:
        self.pool._give(self.entry)


#: The process's kept connections (`request(…, keep_alive=True)`).
kept = KeepAlive()
os.register_at_fork(after_in_child=kept.forget)
