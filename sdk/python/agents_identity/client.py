"""The identity API as an agent calls it (`Authorization: Bearer agt_…`), over httpx: register keys,
read a related user's keys, send a user an envelope."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from agents_identity.keys import Credentials, KeyPairs


class ApiError(Exception):
    """An error answer of the platform: `status`, `code`, the sentence, and the whole body."""

    def __init__(self, status: int, body: dict) -> None:
        self.status, self.body = status, body
        self.code = str(body.get("code", "error"))
        super().__init__(f"{status} {self.code}: {body.get('error', '')}")


class IdentityClient:
    """A thin client of `/v1/identity/` with the agent's token (`httpx.Client`, 10 s timeouts)."""

    def __init__(self, credentials: Credentials, *, http: httpx.Client | None = None) -> None:
        self.credentials = credentials
        self.http = http or httpx.Client(base_url=credentials.base_url, timeout=10.0,
                                         headers={"Authorization": f"Bearer {credentials.agent_token}", "Accept": "application/json"})

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        """Call `method path`; return the JSON answer or raise `ApiError`."""
        response = self.http.request(method, path, json=body)
        data = response.json() if response.content else {}
        if response.is_error:
            raise ApiError(response.status_code, data if isinstance(data, dict) else {})
        return data

    def _agent_path(self) -> str:
        return f"/v1/identity/agents/{quote(self.credentials.agent_id, safe='')}"

    def register_keys(self, keys: KeyPairs | None = None, webhook_secret: str | None = None) -> dict:
        """Register the agent's public keys (default: its credentials' keys and webhook secret); return the key set."""
        keys = keys or self.credentials.keys
        body = {"public_key": keys.public_key, "signing_public_key": keys.signing_public_key}
        secret = webhook_secret or self.credentials.webhook_secret
        if secret:
            body["webhook_secret"] = secret
        return self.request("POST", f"{self._agent_path()}/keys/register", body)

    def user_keys(self, user_id: str) -> list[dict]:
        """Return `user_id`'s key sets (only while the user has an active relation with this agent; else ApiError 404)."""
        return self.request("GET", f"{self._agent_path()}/users/{quote(user_id, safe='')}/keys")["keys"]

    def send_to_user(self, user_id: str, envelope: str) -> dict:
        """Put an envelope in `user_id`'s inbox; return the stored envelope's view."""
        return self.request("POST", f"/v1/identity/users/{quote(user_id, safe='')}/messages", {"envelope": envelope})

    def close(self) -> None:
        self.http.close()
