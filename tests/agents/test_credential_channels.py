"""Every credential of the corpus (issue 29 item 1), through every way text reaches the platform:
refused where a caller writes it (a run's input, a session append, a chat message), masked where
the platform receives it (a tool's result, before it goes back to the model: the request the
loopback gateway received is read). Each test greps the org's files for what must not be there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runs.models import Run
from chat.models import Message
from sessions.models import Event
from tenancy import stores
from tests.agents.conftest import fund, make_agent, run
from tests.agents.test_credentials import _Secrets
from tests.support.credentials import credential_corpus, leaked, needles
from tests.support.upstream import Reply
from tests.support.files import file_bytes

pytestmark = pytest.mark.django_db

CORPUS = credential_corpus()
NAMES = [name for name, _, _ in CORPUS]
SAMPLES_PER_PAGE = 24  # credentials in one fetched page (one tool result)


def _org_bytes(slug: str) -> bytes:
    path = stores.store_path(slug)
    return b"".join(file_bytes(p) for p in Path(path).parent.rglob("*") if p.is_file())


def _leaks(where: bytes | str, samples) -> list[str]:
    text = where.decode(errors="replace") if isinstance(where, bytes) else where
    return [name for name, _, value in samples if leaked(text, value)]


def _refused(response, name: str, value: str) -> None:
    assert response.status_code == 422, (name, response.content[:300])
    assert response.json()["code"] == "secret_in_transcript", name
    assert not leaked(response.content.decode(), value), name


def test_every_corpus_credential_in_a_run_input_is_refused(funded, upstream):
    make_agent(funded, "echo")
    for name, text, value in CORPUS:
        _refused(run(funded, "echo", f"remember this: {text}"), name, value)
    with funded.context():
        assert Run.objects.count() == 0
    assert upstream.chat_requests == [] and _leaks(_org_bytes(funded.slug), CORPUS) == []


def test_every_corpus_credential_in_a_session_append_is_refused(org_a):
    session = org_a.client.post("/v1/agents/sessions", {"agent": "x"}, content_type="application/json").json()
    for name, text, value in CORPUS:
        for payload in (text, {"text": text}):
            response = org_a.client.post(f"/v1/agents/sessions/{session['id']}/events", {"kind": "message", "payload": payload},
                                         content_type="application/json")
            _refused(response, name, value)
    with org_a.context():
        assert Event.objects.count() == 0
    assert _leaks(_org_bytes(org_a.slug), CORPUS) == []


def test_every_corpus_credential_in_a_chat_message_is_refused(funded, upstream):
    for name, text, value in CORPUS:
        response = funded.client.post("/v1/agents/chat", {"messages": [{"role": "user", "content": text}]}, content_type="application/json")
        _refused(response, name, value)
    with funded.context():
        assert (Message.objects.count(), Run.objects.count()) == (0, 0)
    assert upstream.chat_requests == [] and _leaks(_org_bytes(funded.slug), CORPUS) == []


def test_every_corpus_credential_in_a_tool_result_is_masked_before_it_goes_back_to_the_model(funded, upstream, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = ["127.0.0.1"]
    fund(funded, 100_000)
    groups = [CORPUS[i : i + SAMPLES_PER_PAGE] for i in range(0, len(CORPUS), SAMPLES_PER_PAGE)]
    server = _Secrets(["\n\n".join(text for _, text, _ in group) for group in groups])  # a page per group
    make_agent(funded, "fetch", tools=["http_get"])
    try:
        for index, group in enumerate(groups):
            upstream.script(Reply(tool_calls=[("http_get", {"url": f"{server.url}/s/{index}"})]), Reply(content="fetched"))
            response = run(funded, "fetch", "fetch it")
            assert response.status_code == 200 and response.json()["toolCalls"] == 1, response.content[:300]
            [result] = [m["content"] for m in upstream.chat_requests[-1]["messages"] if m["role"] == "tool"]
            assert result.startswith("HTTP 200") and result.count("[redacted:") >= len(group)
            assert _leaks(result, group) == []
    finally:
        server.stop()
    with funded.context():
        stored = json.dumps([e.payload for e in Event.objects.all()])
    assert "[redacted:" in stored and _leaks(stored, CORPUS) == [] and _leaks(_org_bytes(funded.slug), CORPUS) == []
    assert all(needles(value) for _, _, value in CORPUS)  # every sample had something to look for
