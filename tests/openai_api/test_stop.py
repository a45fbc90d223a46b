"""A stop posted to the session of an OpenAI-compatible streamed call (issue 25), on a real
daphne: the upstream stream is closed before its end, the SDK's stream ends with the error
chunk, the run is `stopped` and unbilled, and the session holds only the run's end after the stop."""

from __future__ import annotations

import openai
import pytest

from tests.runs.test_run_session import running_session
from tests.agents.test_stop import WORDS, assert_only_the_end_after_the_stop, closed_early, long_reply, streaming
from tests.openai_api.conftest import debits, stored_runs

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_stop_closes_the_upstream_stream_of_an_openai_compatible_stream(org, client, upstream):
    upstream.script(long_reply())
    stream = client.chat.completions.create(model="writer", messages=[{"role": "user", "content": "talk"}], stream=True)
    chunks = iter(stream)
    received = [next(chunks)]
    streaming(upstream)
    session_id = running_session(org)

    stopped = org.client.post(f"/v1/agents/sessions/{session_id}/stop", {}, content_type="application/json")
    failure = None
    try:
        received.extend(chunks)
    except openai.APIError as exc:  # the stream's error chunk: the run failed (stopped) after it began
        failure = exc

    assert stopped.status_code == 200
    closed_early(upstream)
    assert len(upstream.chat_requests) == 1
    assert failure is not None and "stopped by" in str(failure)
    [run] = stored_runs(org)
    assert (run.status, run.finish_reason) == ("error", "stopped")
    streamed = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
    assert run.output == streamed and WORDS.startswith(streamed)
    assert_only_the_end_after_the_stop(org, session_id, partial=run.output)
    assert debits(org) == []
