"""The runner's HTTP client of the Agents server (spec 003 routes; nothing imported from it).

Every call raises one of three errors so the daemon can decide: `Transient` (network errors,
timeouts, 429, 5xx: back off and retry), `ClaimRefused` (403 on claim/report: the key was
rotated, the machine removed or its owner changed) and `Fatal` (any other refusal: a bad API
key, a bad request). Sessions calls are best effort and return None on failure.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx

logger = logging.getLogger(__name__)

API = "/v1/agents"


class RunnerError(Exception):
    """A call to the server failed."""


class Transient(RunnerError):
    """Worth retrying after a pause: the server is unreachable, busy or failing."""


class ClaimRefused(RunnerError):
    """403 on claim or report: this daemon's key no longer proves it may work for the machine."""


class Fatal(RunnerError):
    """The server refused the request for good (bad API key, bad input)."""


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        return f"{response.status_code} {body.get('code', '')}: {body.get('error', '')}"
    except ValueError:
        return f"{response.status_code}: {response.text[:200]}"


class ServerClient:
    """Async client of one Agents server acting with one API key.

    `claim_timeout` must exceed the server's claim wait (25 s by default).
    """

    def __init__(self, *, server: str, api_key: str, timeout: float = 30.0, claim_timeout: float = 60.0) -> None:
        self.server = server.rstrip("/")
        self.claim_timeout = claim_timeout
        self.http = httpx.AsyncClient(
            base_url=self.server,
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "agents-runner/1"},
            timeout=timeout,
        )

    async def close(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def _send(self, method: str, path: str, *, refused_is_claim: bool = False, **kwargs: Any) -> httpx.Response:
        try:
            response = await self.http.request(method, API + path, **kwargs)
        except httpx.TransportError as exc:  # connect, read, write, timeouts, protocol errors
            raise Transient(f"{method} {path}: {exc.__class__.__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise Transient(f"{method} {path}: {_error_text(response)}")
        if response.status_code == 403 and refused_is_claim:
            raise ClaimRefused(_error_text(response))
        if response.status_code >= 400:
            raise Fatal(f"{method} {path}: {_error_text(response)}")
        return response

    async def register(self, *, label: str, kind: str, host: str, spec: dict, metrics: dict) -> dict:
        """Register or re-link this machine; return the target view (`id`, …)."""
        body = {"label": label, "kind": kind, "host": host, "spec": spec, "metrics": metrics}
        return (await self._send("POST", "/targets", json=body)).json()

    async def mint_key(self, *, target_id: str) -> str:
        """Mint (or rotate) the machine's claim key; return it (shown once)."""
        return (await self._send("POST", f"/targets/{target_id}/key")).json()["claimKey"]

    async def heartbeat(self, *, target_id: str, metrics: dict) -> dict:
        """Send current metrics (the server stamps the time); return the target view."""
        return (await self._send("PATCH", f"/targets/{target_id}", json={"metrics": metrics})).json()

    async def claim(self, *, target_id: str, key: str) -> dict | None:
        """Long-poll for the next run addressed to this machine: the run, or None (204)."""
        response = await self._send(
            "POST", f"/targets/{target_id}/claim", headers={"X-Target-Key": key}, timeout=self.claim_timeout, refused_is_claim=True
        )
        return None if response.status_code == 204 else response.json()

    async def report(self, *, target_id: str, run_id: str, key: str, result: dict) -> bool:
        """Report a run's result; return whether the server took it (False: already settled)."""
        response = await self._send(
            "POST", f"/targets/{target_id}/runs/{run_id}/report", headers={"X-Target-Key": key}, json=result, refused_is_claim=True
        )
        return bool(response.json().get("delivered"))

    async def append_event(self, *, session_id: str, kind: str, payload: dict) -> dict | None:
        """Append one event to the run's session; None when it was not recorded (logged)."""
        if not session_id:
            return None
        try:
            response = await self._send("POST", f"/sessions/{session_id}/events", json={"kind": kind, "payload": payload})
            return response.json()
        except RunnerError as exc:
            logger.warning("session %s: %s event not recorded: %s", session_id, kind, exc)
            return None

    async def append_events(self, *, session_id: str, events: list[dict]) -> list[dict] | None:
        """Append `events` (`[{kind, payload}, …]`) to the run's session in one request, in order.

        One turn is posted as a single append; several as one batch (`{"events": [...]}`, all or
        none on the server). A batch the server refuses (one bad turn refuses all) is posted
        again turn by turn, so every acceptable turn is still recorded. Returns the stored
        events, or None when nothing was recorded (logged). Best effort, like `append_event`.
        """
        if not session_id or not events:
            return None
        if len(events) == 1:
            stored = await self.append_event(session_id=session_id, kind=events[0]["kind"], payload=events[0]["payload"])
            return None if stored is None else [stored]
        try:
            response = await self._send("POST", f"/sessions/{session_id}/events", json={"events": events})
            return list(response.json()["events"])
        except Fatal as exc:
            logger.warning("session %s: batch of %d refused (%s); posting one by one", session_id, len(events), exc)
        except RunnerError as exc:
            logger.warning("session %s: batch of %d events not recorded: %s", session_id, len(events), exc)
            return None
        stored = [await self.append_event(session_id=session_id, kind=e["kind"], payload=e["payload"]) for e in events]
        return [e for e in stored if e is not None] or None

    async def set_session_status(self, *, session_id: str, status: str) -> None:
        """Report the session's live status (`paused`, `running`); best effort."""
        if not session_id:
            return
        try:
            await self._send("PATCH", f"/sessions/{session_id}", json={"status": status})
        except RunnerError as exc:
            logger.warning("session %s: status %s not recorded: %s", session_id, status, exc)

    async def control(self, *, session_id: str, after: int) -> tuple[list[dict], int]:
        """Return the steering commands posted after cursor `after`, and the next cursor."""
        if not session_id:
            return [], after
        try:
            body = (await self._send("GET", f"/sessions/{session_id}/control", params={"after": after})).json()
        except RunnerError as exc:
            logger.warning("session %s: control poll failed: %s", session_id, exc)
            return [], after
        return list(body.get("commands") or []), int(body.get("cursor") or after)
