"""No credential stored anywhere: refused in what a caller sends, masked in what a model or tool says.

Each test greps the org's database file and its WAL (and the answer) for the raw value.
"""

from __future__ import annotations

import json
import secrets
import string
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from runs.models import Run
from sessions.models import Event, Session
from tenancy import stores
from tests.agents.conftest import debits, fund, make_agent, run
from tests.sessions.sse import open_stream
from tests.support.credentials import credential_corpus, raw_values
from tests.support.live import LiveServer
from tests.support.upstream import Reply
from tests.support.files import file_bytes

pytestmark = pytest.mark.django_db


def _token() -> str:
    return "ghp_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(36))


def _store_bytes(slug: str) -> bytes:
    path = stores.store_path(slug)
    return b"".join(file_bytes(f"{path}{suffix}") for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists())


def test_a_run_input_carrying_a_credential_is_refused_before_anything_is_stored(funded, upstream):
    make_agent(funded, "careful")
    token = _token()
    for body in ({"input": f"deploy with {token}"}, {"input": f"deploy with {token}", "background": True}):
        response = funded.client.post("/v1/agents/careful/run", json.dumps(body), content_type="application/json")
        assert response.status_code == 422, response.content
        answer = response.json()
        assert (answer["code"], [f["rule"] for f in answer["findings"]]) == ("secret_in_transcript", ["github-token"])
        assert "github-token" in answer["error"] and token not in response.content.decode()
    with funded.context():
        assert (Run.objects.count(), Session.objects.count()) == (0, 0)
    assert token.encode() not in _store_bytes(funded.slug)
    assert upstream.chat_requests == [] and debits(funded) == []


def test_a_credential_in_the_models_reply_is_masked_everywhere(funded, upstream):
    make_agent(funded, "leaky")
    token = _token()
    upstream.script(Reply(content=f"your token is {token}"))
    response = run(funded, "leaky", "what is my token?")
    assert response.status_code == 200, response.content
    output = response.json()["output"]
    assert token not in output and output.startswith("your token is [redacted:github-token:")
    with funded.context():
        stored = Run.objects.get()
        texts = [e.payload for e in Event.objects.filter(session_id=stored.session_id)]
    assert token not in stored.output and not any(token in t for t in texts)
    assert any("[redacted:github-token:" in t for t in texts)
    assert token.encode() not in _store_bytes(funded.slug)
    assert len(debits(funded)) == 1  # the run itself went on and was billed


def test_a_credential_in_a_tool_call_and_its_result_is_masked_before_it_goes_back_to_the_model(funded, upstream):
    make_agent(funded, "calc", tools=["calculator"])
    token = _token()
    upstream.script(Reply(tool_calls=[("calculator", {"expression": token})]), Reply(content="done"))
    response = run(funded, "calc", "compute")
    assert response.status_code == 200, response.content
    second = json.dumps(upstream.chat_requests[1]["messages"])
    assert token not in second and "[redacted:github-token:" in second
    with funded.context():
        stored = Run.objects.get()
        tool_turns = [json.loads(e.payload) for e in Event.objects.filter(session_id=stored.session_id, kind="tool-call")]
    assert len(tool_turns) == 1 and token not in json.dumps(tool_turns)
    assert token.encode() not in _store_bytes(funded.slug)


def test_a_steering_message_carrying_a_credential_is_refused(funded, upstream):
    session = funded.client.post("/v1/agents/sessions", {"agent": "x"}, content_type="application/json").json()
    token = _token()
    response = funded.client.post(f"/v1/agents/sessions/{session['id']}/message", {"message": f"use {token}"},
                                  content_type="application/json")
    assert response.status_code == 422 and response.json()["code"] == "secret_in_transcript"
    with funded.context():
        assert Event.objects.filter(session_id=session["id"]).count() == 0
    assert token.encode() not in _store_bytes(funded.slug)


# -- the whole credential corpus through every run path (issue 11 item 4) ------------------------


class _Secrets:
    """A loopback HTTP server `http_get` may fetch: `/s/<i>` answers the corpus's text number i."""

    def __init__(self, texts: list[str]) -> None:
        texts_ = texts

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = texts_[int(self.path.rsplit("/", 1)[1])].encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tool_daphne(django_db_setup, upstream_server):
    """A daphne process whose gateway is the loopback upstream and whose `http_get` may fetch loopback."""
    server = LiveServer({
        "INFERENCE_BASE_URL": upstream_server.base_url, "INFERENCE_API_KEY": "k", "AGENTS_DEFAULT_MODEL": "test-model",
        "AGENTS_TOOL_HTTP_ALLOW": "127.0.0.1", "AGENTS_SSE_PING_SECONDS": "0.2", "AGENTS_SSE_CATCHUP_SECONDS": "0.3",
    }).start()
    yield server
    server.stop()


def _needles(text: str, values: list[str]) -> list[str]:
    """The raw values to look for: every value the scanner finds, the corpus's own, and each long
    line of a multi-line value (a PEM body line leaked alone is still a leak)."""
    values = raw_values(text) + [v.replace("\\n", "\n") for v in values]
    lines = [line for v in values for line in v.split("\n") if len(line) >= 16 and "PRIVATE KEY" not in line]
    return sorted(set(values + lines))


def _org_files(slug: str) -> bytes:
    """Every file of the org's store: the database, its -wal and -shm while they exist (SQLite folds
    the WAL into the database when the last connection closes; the database's free pages are read too)."""
    path = stores.store_path(slug)
    files = [p for p in path.parent.rglob("*") if p.is_file()]
    assert path in files
    return b"".join(file_bytes(p) for p in files)


@pytest.mark.django_db(transaction=True)
def test_the_credential_corpus_leaves_no_raw_value_in_any_file_frame_or_page(make_org, tool_daphne, upstream):
    samples = credential_corpus()  # in pages of 8: every credential goes through every path, in 27 rounds
    corpus = [(" + ".join(n for n, _, _ in page), "\n\n".join(t for _, t, _ in page), [v for _, _, v in page])
              for page in (samples[i : i + 8] for i in range(0, len(samples), 8))]
    secrets_server = _Secrets([text for _, text, _ in corpus])
    org = make_org("proof")
    fund(org, 100_000)
    api = httpx.Client(base_url=tool_daphne.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=60)
    assert api.post("/v1/agents", json={"name": "echo"}).status_code == 201
    assert api.post("/v1/agents", json={"name": "fetch", "tools": ["http_get"]}).status_code == 201
    session_stream = open_stream(tool_daphne.url, org.key, timeout=60)
    sent: list[str] = []  # every answer, run stream and page a client saw
    needles: list[str] = []
    try:
        assert session_stream.next_frame().comment == "stream open"
        for index, (rule, text, values) in enumerate(corpus):
            needles += _needles(text, values)
            for body in ({"input": f"remember {text}"}, {"input": text, "stream": True}):
                refused = api.post("/v1/agents/echo/run", json=body)
                assert refused.status_code == 422 and refused.json()["code"] == "secret_in_transcript", (rule, refused.text)
                sent.append(refused.text)
            upstream.script(Reply(content=f"Here it is: {text} -- done.", chunk_size=5))
            streamed = api.post("/v1/agents/echo/run", json={"input": "say it", "stream": True})
            assert streamed.status_code == 200 and streamed.text.rstrip().split("\n")[-2] == "event: run", rule
            final = json.loads(streamed.text.rstrip().split("\n")[-1][6:])
            assert final["status"] == "ok" and "[redacted:" in final["output"], (rule, final)
            sent.append(streamed.text)
            upstream.script(Reply(tool_calls=[("http_get", {"url": f"{secrets_server.url}/s/{index}"})]), Reply(content="fetched"))
            fetched = api.post("/v1/agents/fetch/run", json={"input": "fetch it"})
            assert fetched.status_code == 200 and fetched.json()["toolCalls"] == 1, (rule, fetched.text)
            sent.append(fetched.text)
            back_to_model = json.dumps(upstream.chat_requests[-1]["messages"])
            assert "[redacted:" in back_to_model, rule
            sent.append(back_to_model)
            for run_id, project in ((final["id"], f"echo-{index}"), (fetched.json()["id"], f"fetch-{index}")):
                session_id = api.get(f"/v1/agents/runs/{run_id}").json()["sessionId"]
                assert api.patch(f"/v1/agents/sessions/{session_id}", json={"project": project, "published": True}).status_code == 200
                page = httpx.get(f"{tool_daphne.url}/builds/{org.slug}/{project}/", timeout=30)
                assert page.status_code == 200, (rule, project)
                assert "[redacted:" in page.text or project.startswith("fetch"), (rule, project)  # the gallery shows replies, not tool results
                sent.append(page.text)
                sent.append(httpx.get(f"{tool_daphne.url}/v1/agents/builds/{org.slug}/{project}", timeout=30).text)
        marker = api.post("/v1/agents/sessions", json={"agent": "marker", "title": "end of the proof"}).json()
        frames = []
        while True:
            frame = session_stream.next_frame()
            assert frame is not None
            frames.append(frame)
            if frame.event == "session" and frame.data["session"]["id"] == marker["id"]:
                break
    finally:
        session_stream.close()
        secrets_server.stop()
        api.close()
    assert sum(1 for f in frames if f.event == "delta") >= len(corpus)  # the replies were streamed to watchers too
    watched = json.dumps([f.data for f in frames if f.data is not None])
    files = _org_files(org.slug)
    assert needles and len(sent) == 9 * len(corpus)
    leaks = [n for n in needles if n.encode() in files or n in watched or any(n in s for s in sent)]
    assert leaks == []
