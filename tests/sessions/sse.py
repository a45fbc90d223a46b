"""A small Server-Sent Events reader over httpx for the stream tests."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class Frame:
    """One SSE frame: `event`, `id`, decoded `data`, or a `comment` (`: ping`)."""

    event: str | None = None
    id: int | None = None
    data: dict | None = None
    comment: str | None = None


@dataclass
class SSEStream:
    """An open stream: `next_frame()`, `events(n)`, `close()`."""

    response: httpx.Response
    client: httpx.Client
    _lines: object = None
    seen: list[Frame] = field(default_factory=list)

    def next_frame(self) -> Frame | None:
        """Return the next frame (comments included), or None when the stream ended."""
        if self._lines is None:
            self._lines = self.response.iter_lines()
        frame = Frame()
        started = False
        for line in self._lines:
            if line == "":
                if started:
                    self.seen.append(frame)
                    return frame
                continue
            started = True
            if line.startswith(":"):
                frame.comment = line[1:].strip()
            else:
                key, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if key == "event":
                    frame.event = value
                elif key == "id":
                    frame.id = int(value)
                elif key == "data":
                    frame.data = json.loads(value)
        return None

    def collect(self, *, events: int | None = None, until_pings: int = 1, timeout: float = 15.0) -> list[Frame]:
        """Read until `events` event/session frames arrived (then `until_pings` more pings), or the end.

        With `events=None` read until `until_pings` pings arrive after the last data frame.
        """
        got: list[Frame] = []
        pings = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            frame = self.next_frame()
            if frame is None:
                break
            if frame.comment is not None:
                if frame.comment == "ping" and (events is None or len(got) >= events):
                    pings += 1
                    if pings >= until_pings:
                        break
                continue
            got.append(frame)
            pings = 0
        return got

    def close(self) -> None:
        self.response.close()
        self.client.close()


def open_stream(base_url: str, key: str, *, params: dict | None = None, headers: dict | None = None, timeout: float = 10.0) -> SSEStream:
    """Open `GET /v1/agents/sessions/stream` and return the stream (status not checked)."""
    client = httpx.Client(timeout=httpx.Timeout(timeout))
    request = client.build_request(
        "GET",
        f"{base_url}/v1/agents/sessions/stream",
        params=params or {},
        headers={"Authorization": f"Bearer {key}", **(headers or {})},
    )
    response = client.send(request, stream=True)
    return SSEStream(response=response, client=client)
