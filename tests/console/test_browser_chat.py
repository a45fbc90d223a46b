"""The console's chat page in real Chromium: a round trip with an agent, the reply streaming in
piece by piece, tool actions as cards, conversations kept and reopened, a refused secret, and
the stop button (live daphne, the loopback upstream streaming its answer)."""

import threading

import pytest

from runs.models import Run
from chat.models import Conversation, Message
from sessions.models import Event
from tests.chat.conftest import wait_until
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_conversation_round_trip_streams_the_reply_in_and_is_kept(page, make_org, make_agent, login, upstream_server, shoot):
    org = make_org("ch")
    make_agent(org, "writer", instructions="Answer briefly.")
    gate = threading.Event()
    upstream_server.script(Reply(content="Hello there, friend.", chunks=["Hello ", "there, ", "friend."], pause_after=1, pause=gate))
    login(page, org)
    page.goto("/console/chat/")
    page.wait_for_selector("#chat-with option[value='agent:writer']", state="attached")
    page.select_option("#chat-with", "agent:writer")
    page.fill("#chat-input", "Greet me")
    page.click("#chat-send")
    # The first piece is on the page while the model is still writing the rest.
    page.wait_for_selector("#chat-messages li.assistant.streaming")
    page.wait_for_function("document.querySelector('#chat-messages li.assistant .bubble').textContent === 'Hello '")
    assert page.is_visible("#chat-stop")
    assert page.get_attribute("#chat-session", "href").startswith("/console/sessions/sess_")
    shoot(page, "chat-streaming")
    gate.set()
    page.wait_for_selector("#chat-messages li.assistant:not(.streaming)")
    assert page.inner_text("#chat-messages li.assistant .bubble") == "Hello there, friend."
    page.wait_for_selector("#chat-stop", state="hidden")
    page.wait_for_selector("#chat-conversations a[data-conversation]")
    assert page.inner_text("#chat-conversations a.current") == "Greet me"
    with org.context():
        conversation = Conversation.objects.get()
        assert [(m.role, m.content) for m in Message.objects.order_by("position")] == [("user", "Greet me"), ("assistant", "Hello there, friend.")]
        run = Run.objects.get()
        assert (run.kind, run.agent_name, run.status, run.output) == ("chat", "writer", "ok", "Hello there, friend.")
    assert page.url.endswith(f"/console/chat/{conversation.id}/")
    # Reopened from its address, the conversation reads back in order.
    page.goto(f"/console/chat/{conversation.id}/")
    page.wait_for_selector("#chat-messages li.assistant")
    assert page.locator("#chat-messages li").all_inner_texts()[0].endswith("Greet me")
    assert page.inner_text("#chat-title") == "Greet me"
    shoot(page, "chat")


def test_tool_actions_show_as_cards_and_a_secret_is_refused_with_nothing_stored(page, make_org, login, upstream_server):
    org = make_org("ct")
    upstream_server.script(Reply(content=None, tool_calls=[("calculator", {"expression": "6*7"})]), Reply(content="It is 42."))
    login(page, org)
    page.goto("/console/chat/")
    page.wait_for_selector("#chat-with option[value='preset:assistant']", state="attached")
    page.fill("#chat-input", "What is 6*7?")
    page.click("#chat-send")
    page.wait_for_selector("#chat-messages li.tool[data-tool='calculator']")
    assert page.inner_text("#chat-messages li.tool .tool-card pre.json >> nth=1") == "42"
    page.wait_for_selector("#chat-messages li.assistant:not(.streaming)")
    assert page.inner_text("#chat-messages li.assistant .bubble") == "It is 42."
    page.wait_for_selector("#chat-stop", state="hidden")
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    page.fill("#chat-input", f"my token is {secret}")
    page.click("#chat-send")
    page.wait_for_selector("#chat-error:not([hidden]) table.findings")
    assert "secret_in_transcript" in page.inner_text("#chat-error")
    assert page.inner_text("#chat-state") == ""  # a refused round leaves no "Thinking…" behind (issue 57 item 3)
    assert page.input_value("#chat-input") == f"my token is {secret}"  # nothing stored: the user's to fix
    assert secret not in page.inner_text("#chat-messages")
    with org.context():
        assert not Message.objects.filter(content__contains=secret).exists()
        assert Message.objects.count() == 2


def test_the_stop_button_stops_the_round_through_its_session(page, make_org, login, upstream_server):
    org = make_org("cs")
    gate = threading.Event()
    upstream_server.script(Reply(content="one two three four", chunks=["one ", "two ", "three ", "four"], pause_after=1, pause=gate))
    login(page, org)
    page.goto("/console/chat/")
    page.wait_for_selector("#chat-with option[value='preset:assistant']", state="attached")
    page.fill("#chat-input", "Count slowly")
    page.click("#chat-send")
    page.wait_for_function("document.querySelector('#chat-messages li.assistant .bubble') && document.querySelector('#chat-messages li.assistant .bubble').textContent === 'one '")
    # A new conversation is in the list (and the address) while its first round still streams (issue 57 item 3).
    page.wait_for_selector("#chat-conversations a.current:text-is('Count slowly')")
    assert "/console/chat/conv_" in page.url
    page.click("#chat-stop")
    page.wait_for_selector("#chat-state:has-text('Stopp')")  # 'Stopping…', or already 'Stopped.': a stop can land before the page looks
    with org.context():
        wait_until(lambda: Event.objects.filter(kind="control").exists())
    # The gate stays shut: the stop closes the model's stream mid-reply (issue 25), it never has to finish.
    page.wait_for_selector("#chat-stop", state="hidden", timeout=30000)
    page.wait_for_selector("#chat-state:has-text('Stopped.')")
    assert page.is_hidden("#chat-error")  # the user's own stop is never an error banner
    assert page.inner_text("#chat-messages li.assistant.stopped .bubble") == "one "
    gate.set()
    with org.context():
        run = Run.objects.get()
        assert (run.kind, run.status, run.finish_reason, run.output) == ("chat", "error", "stopped", "one ")
        assert "stopped by" in run.error and "stopped from the chat page" in run.error
        assert [(m.role, m.content, m.finish_reason) for m in Message.objects.order_by("position")] == [
            ("user", "Count slowly", ""), ("assistant", "one ", "stopped")]
    # Reloaded, the words written before the stop are still there, marked stopped (issue 57 item 3).
    page.reload()
    page.wait_for_selector("#chat-messages li.assistant.stopped")
    assert page.inner_text("#chat-messages li.assistant.stopped .bubble") == "one "
    assert page.inner_text("#chat-messages li.assistant.stopped .stop-note") == "stopped"


def test_a_reply_cut_by_the_token_limit_is_marked_in_the_chat(page, make_org, make_agent, login, upstream_server):
    org = make_org("cx")
    make_agent(org, "terse", instructions="Answer briefly.")
    upstream_server.script(Reply(content="Once upon a ti", chunks=["Once ", "upon a ti"], finish="length"), Reply(content="Whole answer."))
    login(page, org)
    page.goto("/console/chat/")
    page.wait_for_selector("#chat-with option[value='agent:terse']", state="attached")
    page.select_option("#chat-with", "agent:terse")
    page.fill("#chat-input", "Tell me a story")
    page.click("#chat-send")
    page.wait_for_selector("#chat-messages li.assistant.truncated .cut-note")
    assert "cut off at the token limit" in page.inner_text("#chat-messages li.assistant.truncated .cut-note")
    assert page.get_attribute("#chat-messages li.assistant.truncated", "data-finish") == "length"
    page.wait_for_selector("#chat-stop", state="hidden")
    page.fill("#chat-input", "Another")
    page.click("#chat-send")
    page.wait_for_function("document.querySelectorAll('#chat-messages li.assistant').length === 2")
    page.wait_for_selector("#chat-stop", state="hidden")
    assert page.locator("#chat-messages li.assistant.truncated").count() == 1  # a whole reply is not marked
    with org.context():
        assert [r.finish_reason for r in Run.objects.order_by("created_at")] == ["length", "stop"]
