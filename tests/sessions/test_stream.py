"""The live stream (spec 003: GET /v1/agents/sessions/stream) against real daphne processes,
plus a stuck client driven through the ASGI application itself."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from django.db import connections

from sessions import services
from sessions.bus import get_bus, session_frame
from sessions.models import Event
from sessions.presenters import event_view, session_view
from sessions.stream import parse_last_event_id, session_stream
from tests.sessions.sse import open_stream
from tests.support.waiting import until

pytestmark = pytest.mark.both_stores

BASE = "/v1/agents/sessions"


def _api(server, org, method: str, path: str, body=None) -> dict:
    response = httpx.request(method, f"{server.url}{BASE}{path}", json=body, headers={"Authorization": f"Bearer {org.key}"}, timeout=10)
    assert response.status_code in (200, 201), response.text
    return response.json()


def _store_views(org) -> dict[int, dict]:
    with org.context():
        return {e.position: event_view(e) for e in Event.objects.order_by("position")}


def test_the_stream_carries_session_and_event_frames_with_ids(daphne, make_org):
    org = make_org("sse")
    server = daphne
    stream = open_stream(server.url, org.key, headers={"Accept-Encoding": "gzip"})
    try:
        assert stream.response.status_code == 200
        headers = stream.response.headers
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["cache-control"] == "no-cache" and headers["x-accel-buffering"] == "no"
        assert "content-encoding" not in headers
        assert stream.next_frame().comment == "stream open"
        session = _api(server, org, "POST", "", {"agent": "coder", "title": "live"})
        first = _api(server, org, "POST", f"/{session['id']}/events", {"kind": "message", "payload": {"text": "hi"}})
        second = _api(server, org, "POST", f"/{session['id']}/events", {"kind": "log"})
        frames = stream.collect(events=3)
    finally:
        stream.close()
    assert [(f.event, f.id) for f in frames] == [("session", None), ("event", 1), ("event", 2)]
    assert frames[0].data == {"session": session}
    assert frames[1].data == {"event": first} and frames[2].data == {"event": second}
    assert any(f.comment == "ping" for f in stream.seen)


def test_the_stream_needs_a_principal_and_a_sane_last_event_id(daphne, make_org):
    org = make_org("sse")
    server = daphne
    anonymous = httpx.get(f"{server.url}{BASE}/stream", timeout=5)
    assert anonymous.status_code == 403 and anonymous.json()["code"] == "forbidden"
    bad = httpx.get(f"{server.url}{BASE}/stream", headers={"Authorization": f"Bearer {org.key}", "Last-Event-ID": "abc"}, timeout=5)
    assert bad.status_code == 400 and bad.json()["error"].startswith("Last-Event-ID must be a non-negative integer")


def test_reconnecting_with_last_event_id_k_yields_exactly_the_events_after_k(daphne, make_org):
    org = make_org("resume")
    server = daphne
    roots = [_api(server, org, "POST", "", {"agent": "coder"}) for _ in range(2)]
    for n in range(8):
        _api(server, org, "POST", f"/{roots[n % 2]['id']}/events", {"kind": "message", "payload": {"n": n}})
    total = 8
    for k in range(0, total + 1):
        how = {"headers": {"Last-Event-ID": str(k)}} if k % 2 else {"params": {"lastEventId": str(k)}}
        stream = open_stream(server.url, org.key, **how)
        try:
            replayed = stream.collect(events=total - k)
            views = _store_views(org)
            assert [f.id for f in replayed] == list(range(k + 1, total + 1))
            assert [f.data for f in replayed] == [{"event": views[p]} for p in range(k + 1, total + 1)]
            live = _api(server, org, "POST", f"/{roots[k % 2]['id']}/events", {"kind": "log", "payload": {"live": k}})
            total += 1
            following = stream.collect(events=1)
            assert [(f.id, f.data) for f in following] == [(total, {"event": live})]
        finally:
            stream.close()


@pytest.mark.parametrize("beyond", [3, 10**30])  # a log restored to an older backup; a made-up id
def test_an_id_beyond_the_head_opens_with_a_reset_frame_then_goes_on_live_from_the_head(daphne, make_org, beyond):
    org = make_org("resume")
    session = _api(daphne, org, "POST", "", {"agent": "coder"})
    _api(daphne, org, "POST", f"/{session['id']}/events", {"kind": "log"})
    stream = open_stream(daphne.url, org.key, headers={"Last-Event-ID": str(beyond)})
    try:
        assert stream.next_frame().comment == "stream open"
        reset = stream.next_frame()
        live = _api(daphne, org, "POST", f"/{session['id']}/events", {"kind": "log"})
        frames = stream.collect(events=1)
    finally:
        stream.close()
    assert (reset.event, reset.id, reset.data) == ("reset", 1, {"head": 1})
    assert [(f.event, f.id, f.data) for f in frames] == [("event", 2, {"event": live})]


def test_an_id_at_the_head_resumes_without_a_reset(daphne, make_org):
    org = make_org("resume")
    session = _api(daphne, org, "POST", "", {"agent": "coder"})
    _api(daphne, org, "POST", f"/{session['id']}/events", {"kind": "log"})
    stream = open_stream(daphne.url, org.key, headers={"Last-Event-ID": "1"})
    try:
        assert stream.next_frame().comment == "stream open"
        live = _api(daphne, org, "POST", f"/{session['id']}/events", {"kind": "log"})
        frames = stream.collect(events=1)
    finally:
        stream.close()
    assert [(f.event, f.id, f.data) for f in frames] == [("event", 2, {"event": live})]


def test_any_id_on_an_empty_log_is_a_reset_to_zero(org_a, settings):
    settings.AGENTS_SSE_CATCHUP_SECONDS = 60

    async def scenario() -> list[str]:
        stream = session_stream(org=org_a.slug, root=None, last_event_id=7)
        try:
            return [await stream.__anext__(), await stream.__anext__()]
        finally:
            await stream.aclose()

    assert asyncio.run(scenario()) == [": stream open\n\n", 'event: reset\nid: 0\ndata: {"head":0}\n\n']


def test_a_resumed_stream_narrowed_to_a_root_replays_only_that_flow(daphne, make_org):
    org = make_org("resume")
    server = daphne
    mine = _api(server, org, "POST", "", {"agent": "coder"})
    child = _api(server, org, "POST", "", {"agent": "coder", "parentSessionId": mine["id"]})
    other = _api(server, org, "POST", "", {"agent": "coder"})
    for target in (mine, other, child, other, mine):
        _api(server, org, "POST", f"/{target['id']}/events", {"kind": "log"})
    stream = open_stream(server.url, org.key, params={"root": mine["id"]}, headers={"Last-Event-ID": "1"})
    try:
        frames = stream.collect(events=2)
    finally:
        stream.close()
    assert [f.id for f in frames] == [3, 5]


def test_the_stream_delivers_an_event_appended_by_another_process(daphne, make_org):
    org = make_org("xproc")
    server = daphne  # in-memory layer: this test process's writes reach it through the store
    session = _api(server, org, "POST", "", {"agent": "coder"})
    stream = open_stream(server.url, org.key)
    try:
        assert stream.next_frame().comment == "stream open"
        with org.context():
            event = services.session_append_event(session_id=session["id"], kind="message", payload={"from": "elsewhere"}, actor="other-process")
            view = event_view(event)
        frames = stream.collect(events=1)
    finally:
        stream.close()
    assert [(f.event, f.id, f.data) for f in frames] == [("event", event.position, {"event": view})]


def test_two_daphne_processes_serve_one_stream_over_redis(redis_daphnes, make_org):
    org = make_org("redis")
    writer, reader = redis_daphnes  # no store catch-up there: only the bus can bring frames
    stream = open_stream(reader.url, org.key)
    try:
        assert stream.next_frame().comment == "stream open"
        session = _api(writer, org, "POST", "", {"agent": "coder"})
        over_http = _api(writer, org, "POST", f"/{session['id']}/events", {"kind": "message", "payload": {"via": "daphne"}})
        with org.context():
            direct = event_view(services.session_append_event(session_id=session["id"], kind="log", payload={"via": "test"}, actor="t"))
        frames = stream.collect(events=3)
    finally:
        stream.close()
    assert [(f.event, f.id) for f in frames] == [("session", None), ("event", 1), ("event", 2)]
    assert frames[0].data["session"]["id"] == session["id"]
    assert frames[1].data == {"event": over_http} and frames[2].data == {"event": direct}


def test_root_narrows_the_stream_and_never_widens(daphne, make_org):
    org, stranger = make_org("root"), make_org("other")
    server = daphne
    mine = _api(server, org, "POST", "", {"agent": "coder"})
    other = _api(server, org, "POST", "", {"agent": "coder"})
    foreign = _api(server, stranger, "POST", "", {"agent": "coder"})
    for root in (foreign["id"], "sess_" + "0" * 32):
        refused = httpx.get(f"{server.url}{BASE}/stream", params={"root": root}, headers={"Authorization": f"Bearer {org.key}"}, timeout=5)
        assert refused.status_code == 404 and refused.json()["error"] == "session not found"
    stream = open_stream(server.url, org.key, params={"root": mine["id"]})
    stranger_stream = open_stream(server.url, stranger.key)
    try:
        child = _api(server, org, "POST", "", {"agent": "coder", "parentSessionId": mine["id"]})
        _api(server, org, "POST", f"/{other['id']}/events", {"kind": "log"})
        _api(server, org, "PATCH", f"/{other['id']}", {"title": "not mine"})
        in_child = _api(server, org, "POST", f"/{child['id']}/events", {"kind": "log"})
        in_root = _api(server, org, "POST", f"/{mine['id']}/events", {"kind": "log"})
        frames = stream.collect(events=3)
        strangers = stranger_stream.collect(until_pings=2)
    finally:
        stream.close()
        stranger_stream.close()
    assert [(f.event, f.id) for f in frames] == [("session", None), ("event", 2), ("event", 3)]
    assert frames[0].data["session"]["id"] == child["id"]
    assert frames[1].data == {"event": in_child} and frames[2].data == {"event": in_root}
    assert strangers == []


def test_a_stuck_client_is_dropped_while_writes_continue_and_can_resume_and_never_delays_the_others(make_org, transactional_db, settings):
    settings.AGENTS_SSE_PING_SECONDS = 60
    settings.AGENTS_SSE_CATCHUP_SECONDS = 60
    settings.AGENTS_SSE_BUFFER_FRAMES = 256
    from server.asgi import django_asgi_app

    org = make_org("stuck")
    with org.context():
        session = services.session_create(agent="writer", actor="t")
    total = 500

    def scope(last_event_id: str | None = None) -> dict:
        headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {org.key}".encode())]
        if last_event_id:
            headers.append((b"last-event-id", last_event_id.encode()))
        path = f"{BASE}/stream"
        return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http", "path": path,
                "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
                "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}

    def write() -> int:
        with org.context():
            for n in range(total):
                services.session_append_event(session_id=session.id, kind="log", payload={"n": n}, actor="t")
        connections.close_all()
        return total

    async def receive():
        if not getattr(receive, "sent", False):
            receive.sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never hangs up

    async def receive_healthy():
        if not getattr(receive_healthy, "sent", False):
            receive_healthy.sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()

    def ids(chunks: list[bytes]) -> list[int]:
        text = b"".join(chunks).decode()
        return [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]

    async def scenario():
        unblock = asyncio.Event()
        body: list[bytes] = []
        finished = asyncio.Event()

        async def send(message):
            if message["type"] == "http.response.body":
                body.append(message.get("body", b""))
                if not message.get("more_body", False):
                    finished.set()
                elif len(body) >= 2:
                    await unblock.wait()  # the client stopped reading after its first event

        healthy: list[bytes] = []

        async def send_healthy(message):  # a subscriber that reads everything at once
            if message["type"] == "http.response.body":
                healthy.append(message.get("body", b""))

        app = asyncio.create_task(django_asgi_app(scope(), receive, send))
        other = asyncio.create_task(django_asgi_app(scope(), receive_healthy, send_healthy))
        # `: stream open` is sent after the subscription is taken and the head is read: from
        # then on every write arrives live (waiting only for the subscriber let the head read
        # race the first writes on a loaded machine).
        deadline = time.monotonic() + 30
        while not any(b"stream open" in chunk for chunk in body) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        while not any(b"stream open" in chunk for chunk in healthy) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert get_bus().subscriber_count(org.slug) == 2
        written = await asyncio.to_thread(write)
        # The other subscriber gets every event while the stuck one still holds its buffer.
        deadline = time.monotonic() + 30
        while (not ids(healthy) or ids(healthy)[-1] < total) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        healthy_ids = ids(healthy)
        deadline = time.monotonic() + 30  # bounded; generous for a loaded CI machine
        while time.monotonic() < deadline:  # the bus drops the stuck subscriber once it is 256 behind
            if get_bus().subscriber_count(org.slug) == 1:
                break
            await asyncio.sleep(0.01)
        dropped = get_bus().subscriber_count(org.slug) == 1  # the healthy one is still subscribed
        other.cancel()
        unblock.set()
        await asyncio.wait_for(finished.wait(), 10)
        await asyncio.wait_for(app, 10)
        first_ids = ids(body)

        receive.sent = False
        resumed: list[bytes] = []

        async def send_resumed(message):
            if message["type"] == "http.response.body":
                resumed.append(message.get("body", b""))

        again = asyncio.create_task(django_asgi_app(scope(str(first_ids[-1])), receive, send_resumed))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ids(resumed) and ids(resumed)[-1] == total:
                break
            await asyncio.sleep(0.01)
        again.cancel()
        return written, dropped, first_ids, ids(resumed), healthy_ids

    written, dropped, first_ids, resumed_ids, healthy_ids = asyncio.run(scenario())
    assert written == total
    assert healthy_ids == list(range(1, total + 1))
    with org.context():
        assert Event.objects.filter(session_id=session.id).count() == total
    assert dropped is True
    # Before it stopped reading the client got one write; a write carries the frame read and up
    # to COALESCE_FRAMES that waited with it; then the 256 buffered frames, then the drop.
    from sessions.stream import COALESCE_FRAMES

    assert first_ids == list(range(1, len(first_ids) + 1)) and len(first_ids) <= 256 + 1 + COALESCE_FRAMES < total
    assert resumed_ids == list(range(first_ids[-1] + 1, total + 1))


@pytest.mark.parametrize("last_event_id", ["²", "٣", "-1", "1e3", "0x10"])
def test_a_last_event_id_that_is_not_a_plain_number_is_400(org_a, last_event_id):
    for how in ({"HTTP_LAST_EVENT_ID": last_event_id}, {"data": {"lastEventId": last_event_id}}):
        response = org_a.client.get(f"{BASE}/stream", **how)
        assert response.status_code == 400
        assert response.json() == {"status": 400, "code": "invalid_request", "error": "Last-Event-ID must be a non-negative integer (the id: of an event frame)"}


def test_the_openapi_description_of_the_stream_explains_the_reset_frame(org_a):
    operation = org_a.client.get("/v1/agents/openapi.json").json()["paths"][f"{BASE}/stream"]["get"]
    assert "event: reset" in operation["description"] and '{"head": <head>}' in operation["description"]


def test_a_last_event_id_of_any_length_is_beyond_the_head_not_an_error():
    assert parse_last_event_id("9" * 5000, None) >= 2**63 and parse_last_event_id(None, "0042") == 42


def test_a_narrowed_stream_pings_on_time_while_other_flows_keep_it_busy(org_a, settings):
    """Frames of other flows are filtered out, yet the ping still goes out when it is due."""
    settings.AGENTS_SESSION_BUS = "local"
    settings.AGENTS_SSE_PING_SECONDS = 0  # a ping is due at every turn of the loop
    settings.AGENTS_SSE_CATCHUP_SECONDS = 60
    with org_a.context():
        mine = services.session_create(agent="watched", actor="t")
        busy = services.session_create(agent="busy", actor="t")
    busy_frame = session_frame(org=org_a.slug, session_view=session_view(busy, org=org_a.slug))
    mine_frame = session_frame(org=org_a.slug, session_view=session_view(mine, org=org_a.slug))

    async def scenario() -> list[str]:
        stream = session_stream(org=org_a.slug, root=mine.id, last_event_id=None)
        chunks = [await stream.__anext__()]
        for _ in range(50):  # the busy flow's frames are waiting before the stream reads any
            get_bus().publish(org_a.slug, busy_frame)
        get_bus().publish(org_a.slug, mine_frame)
        while not chunks[-1].startswith("event: session"):
            chunks.append(await asyncio.wait_for(stream.__anext__(), 10))
        await stream.aclose()
        return chunks

    chunks = asyncio.run(scenario())
    assert chunks[0] == ": stream open\n\n"
    assert ": ping\n\n" in chunks[1:-1]  # pinged while the 50 filtered frames were drained
    assert f'"id":"{mine.id}"' in chunks[-1] and all(busy.id not in c for c in chunks)


def test_the_stream_delivers_every_event_of_a_batch_in_order_and_resumes_inside_it(live_servers, make_org):
    # A buffer of 8 frames and no store catch-up: the 50 events can only arrive live, as the one
    # bus frame of their batch (50 separate frames would overflow the buffer and drop the stream).
    server = live_servers({"AGENTS_SSE_BUFFER_FRAMES": "8", "AGENTS_SSE_CATCHUP_SECONDS": "60"})
    org = make_org("batch")
    session = _api(server, org, "POST", "", {"agent": "coder"})
    stream = open_stream(server.url, org.key)
    try:
        assert stream.next_frame().comment == "stream open"
        stored = _api(server, org, "POST", f"/{session['id']}/events", {"events": [{"kind": "log", "payload": {"n": n}} for n in range(50)]})
        frames = stream.collect(events=50)
    finally:
        stream.close()
    views = _store_views(org)
    assert [(f.event, f.id) for f in frames] == [("event", p) for p in range(1, 51)]
    assert [f.data for f in frames] == [{"event": e} for e in stored["events"]] == [{"event": views[p]} for p in range(1, 51)]
    resumed = open_stream(server.url, org.key, headers={"Last-Event-ID": "20"})
    try:
        replayed = resumed.collect(events=30)
    finally:
        resumed.close()
    assert [f.id for f in replayed] == list(range(21, 51))


def test_frames_waiting_when_the_stream_reads_go_out_in_one_write_in_order(org_a, settings):
    """A live stream that fell behind catches up in one write: every frame already waiting is
    sent with the one just read, each still its own SSE frame with its id, in order."""
    from sessions.bus import event_frame

    settings.AGENTS_SESSION_BUS = "local"
    settings.AGENTS_SSE_PING_SECONDS = 60
    settings.AGENTS_SSE_CATCHUP_SECONDS = 60
    with org_a.context():
        session = services.session_create(agent="burst", actor="t")
    frames = [event_frame(org=org_a.slug, root=session.id, position=n, event_view={"seq": n, "payload": {"n": n}}) for n in range(1, 11)]

    async def scenario() -> list[str]:
        stream = session_stream(org=org_a.slug, root=None, last_event_id=None)
        chunks = [await stream.__anext__()]
        # `: stream open` is yielded after the subscription is taken: it is attached here.
        [subscription] = get_bus().fanout.subscriptions(org_a.slug)
        waiting = asyncio.ensure_future(stream.__anext__())  # the (empty) replay, then the live wait
        await until(lambda: subscription.waiting, what="the stream to wait on its subscription")
        for frame in frames:  # all ten arrive before the stream runs again
            get_bus().publish(org_a.slug, frame)
        chunks.append(await asyncio.wait_for(waiting, 10))
        while sum(c.count("event: event") for c in chunks) < 10:
            chunks.append(await asyncio.wait_for(stream.__anext__(), 10))
        await stream.aclose()
        return chunks

    chunks = asyncio.run(scenario())
    writes = [c for c in chunks if "event: event" in c]
    assert len(writes) == 1, writes  # one write for the ten frames
    sent = writes[0].split("\n\n")[:-1]
    assert [int(f.split("id: ", 1)[1].split("\n", 1)[0]) for f in sent] == list(range(1, 11))
    assert [json.loads(f.split("data: ", 1)[1])["event"]["payload"]["n"] for f in sent] == list(range(1, 11))


@pytest.mark.parametrize(("linger_ms", "second_write"), [(1000, [2, 3, 4, 5]), (0, [2])])
def test_a_stream_that_just_wrote_gathers_frames_for_the_linger_and_a_quiet_one_writes_at_once(org_a, settings, linger_ms, second_write):
    """`AGENTS_SSE_LINGER_MS`: the first frame after a quiet spell goes out at once, alone; a frame
    arriving right after a write waits out the linger and goes out with every frame that arrived
    meanwhile, in one write (with the linger off, each frame is its own write)."""
    from sessions.bus import event_frame

    settings.AGENTS_SESSION_BUS = "local"
    settings.AGENTS_SSE_PING_SECONDS = 60
    settings.AGENTS_SSE_CATCHUP_SECONDS = 60
    settings.AGENTS_SSE_LINGER_MS = linger_ms
    with org_a.context():
        session = services.session_create(agent="linger", actor="t")
    frames = {n: event_frame(org=org_a.slug, root=session.id, position=n, event_view={"seq": n, "payload": {"n": n}}) for n in range(1, 6)}

    def ids(chunk: str) -> list[int]:
        return [int(f.split("id: ", 1)[1].split("\n", 1)[0]) for f in chunk.split("\n\n")[:-1] if "id: " in f]

    async def scenario() -> tuple[list[int], list[int]]:
        stream = session_stream(org=org_a.slug, root=None, last_event_id=None)
        await stream.__anext__()  # `: stream open`: the subscription is attached
        [subscription] = get_bus().fanout.subscriptions(org_a.slug)
        waiting = asyncio.ensure_future(stream.__anext__())
        await until(lambda: subscription.waiting, what="the stream to wait on its subscription")
        get_bus().publish(org_a.slug, frames[1])
        first = ids(await asyncio.wait_for(waiting, 10))
        waiting = asyncio.ensure_future(stream.__anext__())
        await until(lambda: subscription.waiting, what="the stream to wait again")
        get_bus().publish(org_a.slug, frames[2])
        # Taken from the buffer, not written yet (lingering, or already handed to `waiting`).
        await until(lambda: not subscription.waiting and subscription.backlog == 0, what="the stream to take frame 2")
        for n in (3, 4, 5):
            get_bus().publish(org_a.slug, frames[n])
        second = ids(await asyncio.wait_for(waiting, 10))
        await stream.aclose()
        return first, second

    first, second = asyncio.run(scenario())
    assert first == [1]
    assert second == second_write


def _stalled_client(server, org) -> socket.socket:
    """Open the org's stream on a raw socket with a small receive buffer, read up to `: stream
    open` (its subscription is attached), and return the socket: from here on nobody reads it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET {BASE}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {org.key}\r\n\r\n".encode())
    sock.settimeout(30)
    seen = b""
    while b"stream open" not in seen:
        chunk = sock.recv(4096)
        assert chunk, seen
        seen += chunk
    assert seen.startswith(b"HTTP/1.1 200"), seen[:200]
    return sock


def _event_ids(stream, count: int, *, timeout: float) -> list[int]:
    """Read the next `count` event frames of `stream` (other frames skipped); return their ids.
    Fails after `timeout` seconds (a read blocks at most the stream's own read timeout)."""
    ids: list[int] = []
    deadline = time.monotonic() + timeout
    while len(ids) < count:
        assert time.monotonic() < deadline, f"only {len(ids)} of {count} events within {timeout:g} s"
        frame = stream.next_frame()
        assert frame is not None, f"the stream ended after {len(ids)} of {count} events"
        if frame.event == "event":
            ids.append(frame.id)
    return ids


@pytest.mark.parametrize("layer", ["memory", "redis"])
def test_a_client_that_stops_reading_never_delays_a_reading_one(live_servers, make_org, layer, request):
    """Issue 26 item 2 through daphne and real sockets: one client stops reading (its socket's
    buffers fill), another reads. Every batch of appends reaches the reader before the next is
    written (a bounded wait per batch), so nothing the stalled client holds up delays it."""
    env = {"AGENTS_SSE_CATCHUP_SECONDS": "60", "AGENTS_SSE_PING_SECONDS": "60"}  # frames arrive live only
    if layer == "redis":
        env["REDIS_URL"] = request.getfixturevalue("redis_url")
    server = live_servers(env)
    org = make_org("stall")
    session = _api(server, org, "POST", "", {"agent": "coder"})
    stalled = _stalled_client(server, org)
    reader = open_stream(server.url, org.key, timeout=60)
    batches, per_batch, pad = 12, 100, "x" * 4500  # ~5.5 MB of frames: beyond the stalled socket's buffers (4 MiB at most)
    try:
        assert reader.next_frame().comment == "stream open"
        ids: list[int] = []
        waits = []
        for b in range(batches):
            started = time.monotonic()
            _api(server, org, "POST", f"/{session['id']}/events",
                 {"events": [{"kind": "log", "payload": {"n": b * per_batch + n, "pad": pad}} for n in range(per_batch)]})
            ids += _event_ids(reader, per_batch, timeout=60)
            waits.append(time.monotonic() - started)
            assert ids == list(range(1, (b + 1) * per_batch + 1)), f"batch {b}: the reader has {len(ids)} events"
        # Read what the stalled socket holds up to the end of the last frame (a condition, bounded
        # by 60 s), then whatever follows it within 1 s: a stream ended with it would show its
        # chunked trailer there. (It waited out 5 s of silence after the last byte.)
        last = f"id: {batches * per_batch}\n".encode()
        stalled.settimeout(60)
        held = b""
        while not (last in held and b"\n\n" in held[held.rindex(last):]) and (chunk := stalled.recv(1 << 20)):
            held += chunk
        stalled.settimeout(1)
        try:
            while chunk := stalled.recv(1 << 20):
                held += chunk
        except TimeoutError:
            pass
    finally:
        reader.close()
        stalled.close()
    assert not held.endswith(b"0\r\n\r\n")  # the stalled stream was never ended
    stalled_ids = [int(line[4:]) for line in held.decode(errors="replace").splitlines() if line.startswith("id: ")]
    # What daphne does with a socket that stops reading: its write never blocks (Twisted keeps
    # what the socket cannot take), so the stream never falls behind its subscription and the bus's
    # AGENTS_SSE_BUFFER_FRAMES rule (tests/sessions/test_bus.py) never drops it; every frame waits
    # in daphne's write buffer, in order, for the client to read again.
    assert stalled_ids == list(range(1, batches * per_batch + 1))
