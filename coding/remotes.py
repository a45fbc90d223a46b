"""Which clone URLs a repository may name, and which push credential an org may use.

Clone URLs (POST /v1/agents/repos `cloneUrl`; issue 14 item 1):

- `https://host[:port]/path` — no user or password in the URL (a credential is named, never
  pasted); `ssh://[user@]host[:port]/path` or the scp-like `user@host:path`;
  `file:///abs/path` only under one of `AGENTS_REPO_FILE_ROOTS` (resolved, links followed).
- A host that is, or resolves to, a private, loopback, link-local, CGNAT, metadata, multicast
  or unspecified address is refused unless listed in `AGENTS_REPO_ALLOW_HOSTS` (the rules of
  `toolkit.outbound`, `repo_policy`). Checked when the repo is registered (literal addresses
  and names that resolve) and again, resolving, before every clone, fetch and push
  (`check_reachable`): the `Remote` then carries the checked `address`, and the platform's git
  connects to exactly that address (`Remote.pin_config`: `http.curloptResolve` for https, the
  ssh command's `HostName` for ssh) with redirects off — a name that later points inward, or
  answers differently to git's own lookup (DNS rebinding), reaches nothing.
- Anything else (other schemes, `ext::`, a leading `-`, whitespace or control characters) is 400.

Push credentials are operator configuration (`AGENTS_REPO_CREDENTIALS`, JSON
`{"<name>": {"ref": "env:VAR" | "file:/path", "grantedTo": ["slug", …]}}`): an org admin names one
granted to the org; the value is read only by `credential_value` at push time on this server.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import RepoScheme
from toolkit import outbound

MAX_URL = 2048
_SCP_LIKE = re.compile(r"^(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*|/.+)$")
_HOST = re.compile(r"^[A-Za-z0-9.-]{1,253}$|^\[[0-9A-Fa-f:.]+\]$")
_FORBIDDEN_CHARS = re.compile(r"[\s\x00-\x1f\x7f\\]")


@dataclass(frozen=True)
class Remote:
    """A checked clone URL: its scheme (`RepoScheme`), host ("" for file), local path (file).

    `port` is the URL's (or the scheme's default); `address` the IP the host resolved to when it
    was checked with `resolve=True` ("" otherwise): git is pinned to it (`pin_config`).
    """

    url: str
    scheme: str
    host: str = ""
    path: str = ""
    port: int = 0
    address: str = ""

    def pin_config(self) -> list[str]:
        """Return git `-c` options making an https transfer connect to `address` and follow no redirect.

        Example: host `git.example.com`, port 443, address `140.82.112.3` →
        `["-c", "http.curloptResolve=git.example.com:443:140.82.112.3", "-c", "http.followRedirects=false"]`.
        Empty for other schemes and for an unresolved remote (ssh is pinned by `ssh_host`).
        """
        if self.scheme != RepoScheme.HTTPS or not self.address:
            return []
        shown = f"[{self.address}]" if ":" in self.address else self.address
        return ["-c", f"http.curloptResolve={self.host}:{self.port}:{shown}", "-c", "http.followRedirects=false"]

    def ssh_host(self) -> str:
        """Return the address ssh must connect to (`HostName`) for an ssh remote checked with `resolve=True`, else ""."""
        return self.address if self.scheme == RepoScheme.SSH else ""


def repo_policy() -> outbound.Policy:
    """Return the outbound policy of clone URLs (`AGENTS_REPO_ALLOW_HOSTS` admits inward hosts)."""
    return outbound.Policy(allow_hosts=tuple(settings.AGENTS_REPO_ALLOW_HOSTS or ()))


def _check_host(host: str, *, port: int, resolve: bool, strict_dns: bool = True) -> str:
    """Raise `InvalidRequest` when `host` is inward (unless allowed); return the checked address when `resolve`.

    The rule is `toolkit.outbound`'s, as for webhooks: the written host is judged first
    (`outbound.check_host`: `localhost.`, `2130706433`, `0xa9fea9fe`, `[2002:7f00:1::1]` are
    refused), then `resolve` looks a name up once and checks every answer; the first one is
    returned ("" when not resolving, or when the name does not resolve and not `strict_dns`).
    """
    if not host.strip("[]") or not _HOST.fullmatch(host):
        raise InvalidRequest("cloneUrl: the host is not a valid host name")
    policy = repo_policy()
    try:
        bare = outbound.check_host(host, policy=policy)
    except outbound.Refused as exc:
        raise InvalidRequest(f"cloneUrl: {exc}; the operator must list the host in AGENTS_REPO_ALLOW_HOSTS") from exc
    if not resolve:
        return ""
    try:
        return policy.address(bare, port)
    except outbound.Unresolved as exc:
        if not strict_dns:
            return ""
        raise InvalidRequest(f"cloneUrl: host {bare} does not resolve") from exc
    except outbound.Refused as exc:
        raise InvalidRequest(f"cloneUrl: {exc}; the operator must list the host in AGENTS_REPO_ALLOW_HOSTS") from exc


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


def parse_clone_url(url: object, *, resolve: bool = False, strict_dns: bool = True) -> Remote:
    """Return the checked `Remote` for `url`; raise `InvalidRequest` (400) naming what is wrong.

    `resolve`: also look the host up once and check every answer (`strict_dns`: a name that does
    not resolve is refused; at create it is accepted, as for a webhook URL).

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
        address = _check_host(scp.group("host"), port=22, resolve=resolve, strict_dns=strict_dns)
        return Remote(url=url, scheme=RepoScheme.SSH, host=scp.group("host").lower(), port=22, address=address)
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
        port = parts.port or (443 if scheme == RepoScheme.HTTPS else 22)
    except ValueError as exc:
        raise InvalidRequest("cloneUrl: the port is not valid") from exc
    if not parts.path or parts.path == "/":
        raise InvalidRequest("cloneUrl: the URL names no repository path")
    address = _check_host(f"[{host}]" if ":" in host else host, port=port, resolve=resolve, strict_dns=strict_dns)
    return Remote(url=url, scheme=scheme, host=host.lower(), port=port, address=address)


def check_at_create(url: object) -> Remote:
    """Check `url` when a repository is registered or changed: the written host and, resolving once,
    every address its name has now (a name that does not resolve yet is accepted, as for webhooks).

    Raises `InvalidRequest` (400) naming the reason. The `Remote` is checked again, resolving
    strictly, before every clone, fetch and push (`check_reachable`).
    """
    return parse_clone_url(url, resolve=True, strict_dns=False)


def check_reachable(url: str) -> Remote:
    """Check `url` again right before git talks to it, resolving its host once; return the `Remote`
    carrying the checked `address` (git is pinned to it: `Remote.pin_config`, `Remote.ssh_host`).

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
