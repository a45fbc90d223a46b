"""A local stdio MCP server for a person talking to identity agents (the Claude Code plugin, spec 001 V1).

`agents-identity mcp` (with the `mcp` extra: `pip install 'agents-identity[mcp]'`) runs on the
user's machine and gives an MCP client (Claude Code, Claude Desktop, Cursor…) four tools:

| tool | what it does |
|---|---|
| `list_agents` | the identity agents the user has added (active relations), and the ones the user created |
| `read_manifest` | an agent's capability manifest, as the agent signed and registered it (docs/manifests.md), its signature checked HERE with the agent's current keys |
| `send_message` | seal a text to the agent's current X25519 key, sign it with the user's Ed25519 key, send it |
| `read_inbox` | the user's inbox, each envelope opened and its signature verified HERE, with the user's private key |

The user's key pair lives in a file on this machine (`AGENTS_IDENTITY_KEYS`, default
`~/.config/agents-identity/user-keys.json`, mode 0600), made on first use; only its public
halves are registered (`PUT /v1/identity/users/me/keys`). The server forwards sealed envelopes
and never sees a plaintext. Environment: `AGENTS_URL` (the platform, default
`http://127.0.0.1:8000`), `AGENTS_API_KEY` (the user's API key, `ak_…`).
"""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agents_identity.envelope import EnvelopeError, Party, Receiver, SignerKey, seal, text_body
from agents_identity.keys import KeyPairs, jwk_of, key_from_jwk
from agents_identity.manifest import ManifestError, public_key, verify_manifest

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_KEYS = Path("~/.config/agents-identity/user-keys.json")
INBOX_LIMIT = 50
VALID_KEY_STATUSES = ("current", "grace")  # the key statuses whose signatures count (docs/manifests.md)


class ToolFailure(Exception):
    """A tool's refusal, told to the MCP client as a tool error (its sentence)."""


def load_or_create_keys(path: Path) -> KeyPairs:
    """Return the user's key pair stored at `path` (JWKs), making and saving a new one (0600) if none."""
    path = path.expanduser()
    if path.exists():
        data = json.loads(path.read_text())
        return KeyPairs(x25519=key_from_jwk(data["x25519_private_jwk"]), ed25519=key_from_jwk(data["ed25519_private_jwk"]))
    keys = KeyPairs()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as out:
        json.dump({"x25519_private_jwk": jwk_of(keys.x25519), "ed25519_private_jwk": jwk_of(keys.ed25519)}, out)
    return keys


@dataclass
class UserSide:
    """The user's side of identity messaging: the platform's API with the user's key, and the user's keys."""

    api: httpx.Client
    keys: KeyPairs
    user_id: str = ""

    @classmethod
    def from_env(cls, environ: dict | None = None) -> UserSide:
        """Build from `AGENTS_URL`, `AGENTS_API_KEY`, `AGENTS_IDENTITY_KEYS` (see the module text)."""
        env = os.environ if environ is None else environ
        key = env.get("AGENTS_API_KEY", "")
        if not key:
            raise SystemExit("AGENTS_API_KEY is not set: the user's API key of the platform (ak_…)")
        api = httpx.Client(base_url=env.get("AGENTS_URL", DEFAULT_URL).rstrip("/"), headers={"Authorization": f"Bearer {key}"},
                           timeout=30)
        return cls(api=api, keys=load_or_create_keys(Path(env.get("AGENTS_IDENTITY_KEYS") or DEFAULT_KEYS)))

    def _json(self, method: str, path: str, **kwargs) -> dict:
        answer = self.api.request(method, path, **kwargs)
        if answer.status_code >= 400:
            try:
                error = answer.json().get("error") or answer.text
            except ValueError:
                error = answer.text
            raise ToolFailure(f"{method} {path}: {answer.status_code} {error}"[:500])
        return answer.json() if answer.content else {}

    def register(self) -> str:
        """Register the user's public keys (idempotent: 200 when unchanged); return the user's id."""
        self._json("PUT", "/v1/identity/users/me/keys", json={"public_key": self.keys.public_key,
                                                                "signing_public_key": self.keys.signing_public_key})
        self.user_id = self._json("GET", "/v1/identity/users/me/keys")["user_id"]
        return self.user_id

    def list_agents(self) -> list[dict]:
        """Return `[{agent_id, custom_id, display_name, added, created}]`: the agents added (an added agent's
        names are its creator's to read: None), then the ones the user created."""
        found: dict[str, dict] = {}
        for relation in self._json("GET", "/v1/identity/relations").get("relations", []):
            found[relation["agent_id"]] = {"agent_id": relation["agent_id"], "custom_id": None, "display_name": None,
                                           "added": True, "created": False}
        for agent in self._json("GET", "/v1/identity/agents").get("agents", []):
            entry = found.setdefault(agent["agent_id"], {"agent_id": agent["agent_id"], "added": False})
            entry.update(custom_id=agent.get("custom_id"), display_name=agent.get("display_name"), created=True)
        return list(found.values())

    def manifest(self, agent: str) -> dict:
        """Return agent `agent`'s registered manifest as the platform lists it (`{agent_id, manifest, signing_kid,
        signing_key_status, verification, registered_at}`, docs/manifests.md) plus `verified_here`:
        `{"verifies": bool, "kid": str | None, "error": str | None}`, its signatures checked on THIS machine
        (`agents_identity.manifest.verify_manifest`) with the agent's current and in-grace signing keys
        (`GET …/keys`), so a reader need not take the platform's word for it. 404 (a `ToolFailure`) when none."""
        listed = self._json("GET", f"/v1/identity/agents/{agent}/manifest")
        keys = {k["signing_kid"]: public_key(k["signing_public_key"]) for k in self._agent_keys(agent).get("keys", [])
                if k.get("status") in VALID_KEY_STATUSES and k.get("signing_kid") and k.get("signing_public_key")}
        try:
            listed["verified_here"] = {"verifies": True, "kid": verify_manifest(listed.get("manifest"), keys), "error": None}
        except ManifestError as exc:
            listed["verified_here"] = {"verifies": False, "kid": None, "error": str(exc)}
        return listed

    def _agent_keys(self, agent: str) -> dict:
        return self._json("GET", f"/v1/identity/agents/{agent}/keys")

    def send(self, agent: str, text: str) -> dict:
        """Seal `text` to agent `agent`'s current key, sign it with the user's key, send it; return the platform's answer."""
        if not self.user_id:
            self.register()
        keys = self._agent_keys(agent)
        current = next((k for k in keys["keys"] if k.get("status") == "current"), None)
        if current is None:
            raise ToolFailure(f"agent {agent!r} has registered no keys yet: it cannot be written to")
        envelope = seal(body=text_body(text), sender=Party("user", self.user_id), recipient=Party("agent", keys["agent_id"]),
                        recipient_key=base64.b64decode(current["public_key"]), signing_key=self.keys.ed25519)
        return self._json("POST", f"/v1/identity/agents/{agent}/messages", json={"envelope": envelope})

    def inbox(self, *, limit: int = INBOX_LIMIT) -> list[dict]:
        """Return the user's newest inbox items, each envelope opened and verified here:
        `[{kind, agent_id, created_at, text | error}]` (an item that does not open says why)."""
        if not self.user_id:
            self.register()
        items = self._json("GET", "/v1/identity/inbox", params={"limit": max(1, min(int(limit), INBOX_LIMIT))}).get("items", [])
        signers: dict[str, list[dict]] = {}

        def signer(sender: Party, skid: str) -> SignerKey | None:
            if sender.id not in signers:
                signers[sender.id] = self._agent_keys(sender.id).get("keys", [])
            for keys in signers[sender.id]:
                if keys.get("signing_kid") == skid:
                    public = Ed25519PublicKey.from_public_bytes(base64.b64decode(keys["signing_public_key"]))
                    return SignerKey(public, keys["status"])
            return None

        receiver = Receiver(me=Party("user", self.user_id), private_keys=self.keys.decryption_keys(), signer=signer)
        opened = []
        for item in items:
            entry: dict[str, Any] = {"kind": item.get("kind"), "agent_id": item.get("agent_id"), "created_at": item.get("created_at")}
            if item.get("kind") == "envelope":
                try:
                    envelope = (item.get("envelope") or {}).get("envelope")
                    entry["text"] = receiver.open(envelope, sender=Party("agent", item.get("agent_id"))).text
                except (EnvelopeError, ToolFailure, ValueError) as exc:
                    entry["error"] = f"not opened: {exc}"
            else:
                entry["system"] = item.get("system")
            opened.append(entry)
        return opened


def build_server(side: UserSide):
    """Return the `mcp` SDK's `MCPServer` with the four tools bound to `side` (needs the `mcp` extra)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("agents-identity", instructions="Talk to identity agents: your messages are sealed on this machine "
                                                       "and only the agent can open them.")

    def guarded(fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ToolFailure as exc:
            raise ToolError(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise ToolError(f"the platform did not answer: {type(exc).__name__}") from exc

    @server.tool()
    def list_agents() -> list[dict]:
        """List your identity agents: the ones you added (you can message them) and the ones you created."""
        return guarded(side.list_agents)

    @server.tool()
    def read_manifest(agent: str) -> dict:
        """Read an identity agent's capability manifest (its A2A card, signed by the agent) and whether its signature
        verifies here with the agent's current keys (`verified_here`). `agent`: its id or custom_id."""
        return guarded(side.manifest, agent)

    @server.tool()
    def send_message(agent: str, text: str) -> dict:
        """Send a text to an identity agent, sealed on this machine to the agent's key and signed with yours. `agent`: its id or custom_id."""
        return guarded(side.send, agent, text)

    @server.tool()
    def read_inbox(limit: int = 20) -> list[dict]:
        """Read your inbox, newest first: each agent's message is opened and its signature checked on this machine."""
        return guarded(side.inbox, limit=limit)

    return server


def serve(environ: dict | None = None) -> None:
    """Run the stdio MCP server (the `agents-identity mcp` command): register the user's keys, then serve."""
    side = UserSide.from_env(environ)
    side.register()
    build_server(side).run()
