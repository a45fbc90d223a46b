"""An agent's key pairs and credentials: load them (JWK, the console's form), make new ones, save them.

The console's guided creation shows the agent's X25519 and Ed25519 private keys as JWKs
(`{"kty": "OKP", "crv": "X25519" | "Ed25519", "x": …, "d": …}`) and offers them, with the
token, as one `agent.json`:

    {"base_url": "http://127.0.0.1:8000", "agent_id": "ext_…", "agent_token": "agt_…",
     "x25519_private_jwk": {…}, "ed25519_private_jwk": {…}, "webhook_secret": "whsec_…"}

`Credentials.load(path)` reads that file; `Credentials.from_env()` reads `AGENTS_URL`,
`AGENT_ID`, `AGENT_TOKEN`, `AGENT_X25519_JWK`, `AGENT_ED25519_JWK`, `AGENT_WEBHOOK_SECRET`
(JWKs as JSON text), and `AGENT_CREDENTIALS` (a path to such a file) for what is not set.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agents_identity.envelope import b64u, kid, raw_public, unb64u


def _private_raw(key: X25519PrivateKey | Ed25519PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())


def jwk_of(key: X25519PrivateKey | Ed25519PrivateKey) -> dict:
    """Return the private OKP JWK of `key` (RFC 8037), as WebCrypto exports it."""
    crv = "X25519" if isinstance(key, X25519PrivateKey) else "Ed25519"
    return {"kty": "OKP", "crv": crv, "x": b64u(raw_public(key)), "d": b64u(_private_raw(key))}


def key_from_jwk(jwk: dict | str):
    """Return the private key of an OKP JWK (dict or JSON text); `ValueError` if it is not one.

    When the JWK carries `x`, it must be the public half of `d` (a mismatched pair is refused).
    """
    if isinstance(jwk, str):
        jwk = json.loads(jwk)
    if not isinstance(jwk, dict) or jwk.get("kty") != "OKP" or jwk.get("crv") not in ("X25519", "Ed25519") or "d" not in jwk:
        raise ValueError("not a private OKP JWK (X25519 or Ed25519)")
    raw = unb64u(jwk["d"])
    key = X25519PrivateKey.from_private_bytes(raw) if jwk["crv"] == "X25519" else Ed25519PrivateKey.from_private_bytes(raw)
    if "x" in jwk and unb64u(jwk["x"]) != raw_public(key):
        raise ValueError("the JWK's x is not the public half of its d")
    return key


@dataclass
class KeyPairs:
    """An X25519 key (encryption) and an Ed25519 key (signing), plus older X25519 keys still in grace."""

    x25519: X25519PrivateKey = field(default_factory=X25519PrivateKey.generate)
    ed25519: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    previous_x25519: list[X25519PrivateKey] = field(default_factory=list)

    @property
    def public_key(self) -> str:
        """Standard base64 of the raw X25519 public key (what `keys/register` takes)."""
        return base64.b64encode(raw_public(self.x25519)).decode()

    @property
    def signing_public_key(self) -> str:
        """Standard base64 of the raw Ed25519 public key."""
        return base64.b64encode(raw_public(self.ed25519)).decode()

    @property
    def kid(self) -> str:
        return kid(self.x25519)

    @property
    def signing_kid(self) -> str:
        return kid(self.ed25519)

    def decryption_keys(self) -> dict[str, X25519PrivateKey]:
        """Every X25519 private key this holder can open with, by key id (current first)."""
        keys = {kid(self.x25519): self.x25519}
        for old in self.previous_x25519:
            keys.setdefault(kid(old), old)
        return keys


def new_webhook_secret() -> str:
    """Return a fresh Standard Webhooks secret, `whsec_` + base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


@dataclass
class Credentials:
    """What an agent runs with: where the platform is, who it is, its token, keys and webhook secret."""

    base_url: str
    agent_id: str
    agent_token: str
    keys: KeyPairs
    webhook_secret: str | None = None

    @classmethod
    def from_dict(cls, data: dict) -> Credentials:
        """Build from the `agent.json` shape (see module doc); `ValueError` naming what is missing."""
        missing = [k for k in ("base_url", "agent_id", "agent_token", "x25519_private_jwk", "ed25519_private_jwk") if not data.get(k)]
        if missing:
            raise ValueError("credentials lack " + ", ".join(missing))
        previous = [key_from_jwk(j) for j in data.get("previous_x25519_private_jwks") or []]
        keys = KeyPairs(x25519=key_from_jwk(data["x25519_private_jwk"]), ed25519=key_from_jwk(data["ed25519_private_jwk"]), previous_x25519=previous)
        return cls(base_url=str(data["base_url"]).rstrip("/"), agent_id=data["agent_id"], agent_token=data["agent_token"], keys=keys,
                   webhook_secret=data.get("webhook_secret") or None)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Credentials:
        """Read an `agent.json` file."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    @classmethod
    def from_env(cls, environ: dict | None = None) -> Credentials:
        """Read the environment (see module doc); a file named by `AGENT_CREDENTIALS` fills the gaps."""
        env = os.environ if environ is None else environ
        data: dict = {}
        if env.get("AGENT_CREDENTIALS"):
            data.update(json.loads(Path(env["AGENT_CREDENTIALS"]).read_text()))
        for name, var in (("base_url", "AGENTS_URL"), ("agent_id", "AGENT_ID"), ("agent_token", "AGENT_TOKEN"),
                          ("x25519_private_jwk", "AGENT_X25519_JWK"), ("ed25519_private_jwk", "AGENT_ED25519_JWK"),
                          ("webhook_secret", "AGENT_WEBHOOK_SECRET")):
            if env.get(var):
                data[name] = env[var]
        return cls.from_dict(data)

    def as_dict(self) -> dict:
        """Return the `agent.json` shape (private keys included: keep it 0600)."""
        data = {"base_url": self.base_url, "agent_id": self.agent_id, "agent_token": self.agent_token,
                "x25519_private_jwk": jwk_of(self.keys.x25519), "ed25519_private_jwk": jwk_of(self.keys.ed25519)}
        if self.keys.previous_x25519:
            data["previous_x25519_private_jwks"] = [jwk_of(k) for k in self.keys.previous_x25519]
        if self.webhook_secret:
            data["webhook_secret"] = self.webhook_secret
        return data

    def save(self, path: str | os.PathLike) -> None:
        """Write the `agent.json` shape to `path`, readable by its owner only (0600)."""
        target = Path(path)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(self.as_dict(), handle, indent=2)
