"""Which clone URLs a repository may name, and which push credential an org may use.

Clone URLs (POST /v1/agents/repos `cloneUrl`; issue 14 item 1):

- `https://host[:port]/path` — no user or password in the URL (a credential is named, never
  pasted); `ssh://[user@]host[:port]/path` or the scp-like `user@host:path`;
  `file:///abs/path` only under one of `AGENTS_REPO_FILE_ROOTS` (resolved, links followed).
- A host that is, or resolves to, a private, loopback, link-local, multicast or unspecified
  address is refused unless listed in `AGENTS_REPO_ALLOW_HOSTS`. Checked when the repo is
  registered (literal addresses and names that resolve) and again, resolving, before every
  clone and push (`check_reachable`), so a name that later points inward is refused then.
- Anything else (other schemes, `ext::`, a leading `-`, whitespace or control characters) is 400.

Push credentials are operator configuration (`AGENTS_REPO_CREDENTIALS`, JSON
`{"<name>": {"ref": "env:VAR" | "file:/path", "grantedTo": ["slug", …]}}`): an org admin names one
granted to the org; the value is read only by `credential_value` at push time on this server.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import RepoScheme

MAX_URL = 2048
_SCP_LIKE = re.compile(r"^(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*|/.+)$")
_HOST = re.compile(r"^[A-Za-z0-9.-]{1,253}$|^\[[0-9A-Fa-f:.]+\]$")
_FORBIDDEN_CHARS = re.compile(r"[\s\x00-\x1f\x7f\\]")


@dataclass(frozen=True)
class Remote:
    """A checked clone URL: its scheme (`RepoScheme`), host ("" for file), local path (file)."""

    url: str
    scheme: str
    host: str = ""
    path: str = ""


def _allowed_host(host: str) -> bool:
    return host.strip("[]").lower() in set(settings.AGENTS_REPO_ALLOW_HOSTS or [])


def _inward(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved


def _check_host(host: str, *, resolve: bool) -> None:
    """Raise `InvalidRequest` when `host` is inward (unless allowed); `resolve` looks names up."""
    bare = host.strip("[]").lower()
    if not bare or not _HOST.fullmatch(host):
        raise InvalidRequest("cloneUrl: the host is not a valid host name")
    if _allowed_host(bare):
        return
    refused = InvalidRequest(f"cloneUrl: host {bare} is private, loopback or link-local; the operator must list it in AGENTS_REPO_ALLOW_HOSTS")
    if bare == "localhost" or bare.endswith(".localhost"):
        raise refused
    try:
        if _inward(bare):
            raise refused
        return  # a public literal address
    except ValueError:
        pass  # a name
    if not resolve:
        return
    try:
        infos = socket.getaddrinfo(bare, None)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidRequest(f"cloneUrl: host {bare} does not resolve") from exc
    if any(_inward(info[4][0]) for info in infos):
        raise refused


def _file_roots() -> list[Path]:
    return [Path(root).resolve() for root in (settings.AGENTS_REPO_FILE_ROOTS or []) if root.strip()]


def _check_file(path: str) -> str:
    if not path.startswith("/"):
        raise InvalidRequest("cloneUrl: a file URL needs an absolute path (file:///…)")
    resolved = Path(path).resolve()
    for root in _file_roots():
        if resolved == root or resolved.is_relative_to(root):
            return str(resolved)
    raise InvalidRequest("cloneUrl: file URLs must point under a directory the operator allows (AGENTS_REPO_FILE_ROOTS)")


def parse_clone_url(url: object, *, resolve: bool = False) -> Remote:
    """Return the checked `Remote` for `url`; raise `InvalidRequest` (400) naming what is wrong.

    Example: `"https://github.com/acme/shop.git"` → `Remote(url, "https", "github.com")`;
    `"file:///etc"` with no allowed root → 400; `"https://u:p@host/x"` → 400.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidRequest("cloneUrl is required")
    url = url.strip()
    if len(url) > MAX_URL:
        raise InvalidRequest(f"cloneUrl: at most {MAX_URL} characters")
    if _FORBIDDEN_CHARS.search(url) or url.startswith("-"):
        raise InvalidRequest("cloneUrl: whitespace, control characters, backslashes and a leading '-' are not allowed")
    scp = _SCP_LIKE.match(url) if "://" not in url else None
    if scp:
        _check_host(scp.group("host"), resolve=resolve)
        return Remote(url=url, scheme=RepoScheme.SSH, host=scp.group("host").lower())
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in RepoScheme.values:
        raise InvalidRequest("cloneUrl: the scheme must be " + ", ".join(RepoScheme.values))
    if parts.query or parts.fragment:
        raise InvalidRequest("cloneUrl: a query or fragment is not allowed")
    if scheme == RepoScheme.FILE:
        if parts.netloc not in ("", "localhost"):
            raise InvalidRequest("cloneUrl: a file URL names no host (file:///path)")
        return Remote(url=url, scheme=scheme, path=_check_file(parts.path))
    if parts.password is not None or (scheme == RepoScheme.HTTPS and parts.username is not None):
        raise InvalidRequest("cloneUrl: no credentials in the URL; name a push credential instead")
    host = parts.hostname or ""
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise InvalidRequest("cloneUrl: the port is not valid") from exc
    if not parts.path or parts.path == "/":
        raise InvalidRequest("cloneUrl: the URL names no repository path")
    _check_host(f"[{host}]" if ":" in host else host, resolve=resolve)
    return Remote(url=url, scheme=scheme, host=host.lower())


def check_reachable(url: str) -> Remote:
    """Check `url` again right before git talks to it, resolving its host; return the `Remote`.

    Raises `InvalidRequest` when the URL is no longer allowed (a file root removed, a name
    now resolving inward).
    """
    return parse_clone_url(url, resolve=True)


# --- push credentials --------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """One operator-granted credential: its name, reference (`env:VAR`/`file:/path`), orgs."""

    name: str
    ref: str
    orgs: frozenset[str]


def credential_grants() -> dict[str, Grant]:
    """Return the operator's grants parsed from `AGENTS_REPO_CREDENTIALS` ({} when unset or malformed)."""
    raw = settings.AGENTS_REPO_CREDENTIALS
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {}
    grants = {}
    for name, entry in (raw or {}).items() if isinstance(raw, dict) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("ref"), str):
            continue
        ref = entry["ref"].strip()
        if not (ref.startswith("env:") or ref.startswith("file:")):
            continue
        orgs = entry.get("grantedTo") or []
        grants[str(name)] = Grant(name=str(name), ref=ref, orgs=frozenset(str(o) for o in orgs if isinstance(o, str)))
    return grants


def check_credential_name(name: object, *, org: str) -> str:
    """Return `name` ("" for none) if the operator granted it to `org`; else `InvalidRequest`.

    The answer never says whether the name exists for another org.
    """
    if name is None:
        return ""
    if not isinstance(name, str):
        raise InvalidRequest("credential must be the name of a push credential")
    name = name.strip()
    if not name:
        return ""
    grant = credential_grants().get(name)
    if grant is None or org not in grant.orgs:
        raise InvalidRequest(f"credential {name!r} is not granted to this org by the operator")
    return name


@dataclass(frozen=True)
class CredentialValue:
    """A resolved push credential: a token/password (`secret`) or an SSH key file (`key_file`)."""

    secret: str = ""
    key_file: str = ""


def credential_value(name: str, *, org: str) -> CredentialValue | None:
    """Resolve granted credential `name` for `org` right before a push; None when unusable.

    `env:VAR` → the variable's value as a token; `file:/path` → an SSH private key file when
    its content looks like one (then only its path is used), else its content as a token.
    """
    grant = credential_grants().get(name or "")
    if grant is None or org not in grant.orgs:
        return None
    kind, _, ref = grant.ref.partition(":")
    if kind == "env":
        value = os.environ.get(ref, "")
        return CredentialValue(secret=value.strip()) if value.strip() else None
    try:
        content = Path(ref).read_text(errors="replace")
    except OSError:
        return None
    if "PRIVATE KEY" in content:
        return CredentialValue(key_file=ref)
    return CredentialValue(secret=content.strip()) if content.strip() else None
