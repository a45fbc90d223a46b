"""The rules of the tool loop that the server and the runner both follow (issue 27 item 1).

A run's loop — on the server (`agents.execution.loop.RunLoop`) or routed to a machine
(`runner.execute.Execution`) — opens with the agent's instructions and the input, asks the
model up to a number of rounds, offers no tools in the last round, reads a tool call's
arguments and a steering `message` the same way, and ends the same way when the model still
asks for tools after its last round. The pieces that hold no I/O live here, once; the loops
around them (the server's streaming and tracing, the machine's HTTP calls) stay on each side.

Roles are the OpenAI chat roles (`agents_site.vocabulary.ChatRole` on the server; this package
imports nothing of it, and tests/runner/test_vocabulary_words.py ties these words to it).
"""

from __future__ import annotations

import json

#: The rounds a run may take when its caller names none (the server's `AGENTS_TOOL_ROUNDS` default).
DEFAULT_TOOL_ROUNDS = 8
#: A run whose model asks for tools in the last round (offered none) and writes no text ends with this error.
NO_ANSWER_AFTER_LAST_ROUND = "the model asked for tools after its last tool round and gave no answer"


def parsed_arguments(raw: str | None) -> dict:
    """Return a tool call's JSON arguments as an object; empty, malformed or non-object arguments → `{}`.

    Example: '{"q": "x"}' → {"q": "x"}; "[1]" → {}; "not json" → {}. (To refuse bad arguments to
    the model instead, `toolkit.invoke.parse_arguments` raises.)
    """
    try:
        value = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def opening_messages(*, instructions: str | None, text: str | None, instructions_role: str = "system") -> list[dict]:
    """Return a run's opening messages: the instructions trimmed (as `instructions_role`, "system"
    or "user"), then the input trimmed as a user turn (omitted when empty; a run with neither
    sends one empty user turn).

    Example: instructions "Be brief", text " hi " → `[{"role": "system", "content": "Be brief"},
    {"role": "user", "content": "hi"}]`.
    """
    messages: list[dict] = []
    instructions = (instructions or "").strip()
    if instructions:
        messages.append({"role": instructions_role, "content": instructions})
    text = (text or "").strip()
    if text or not messages:
        messages.append({"role": "user", "content": text})
    return messages


def command_text(command: dict) -> str:
    """Return the user turn a steering `message` command adds: its `message`, else its `payload`
    (a string as is, any other JSON value as its JSON text), trimmed; "" adds no turn.

    Example: {"message": " go on "} → "go on"; {"payload": {"k": 1}} → '{"k": 1}'; {} → "".
    """
    text = command.get("message")
    if not text and command.get("payload") is not None:
        payload = command["payload"]
        text = payload if isinstance(payload, str) else json.dumps(payload)
    return (text or "").strip()


def offered_tools(definitions: list[dict], *, round_no: int, rounds: int) -> list[dict] | None:
    """Return the tools the model is offered in round `round_no` (1-based) of `rounds`: all of
    `definitions`, or None when there are none or this is the last round (the model must answer).

    Example: ([t], round_no=7, rounds=8) → [t]; ([t], round_no=8, rounds=8) → None.
    """
    return definitions if definitions and round_no < rounds else None


def assistant_turn(content: str | None, tool_calls: list[dict]) -> dict:
    """Return the assistant message that asked for `tool_calls` (each the call's JSON, as sent back
    to the model), its `content` "" rather than null: strict gateways (llama-cpp-python) refuse null."""
    return {"role": "assistant", "content": content or "", "tool_calls": tool_calls}


def tool_turn(call_id: str, result: str) -> dict:
    """Return the message handing the model the `result` text of tool call `call_id`."""
    return {"role": "tool", "tool_call_id": call_id, "content": result}
