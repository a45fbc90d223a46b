"""What of a conversation fits in the model's context window (issue 31 item 2).

Before each completion the loop sends `fit(...)` of its messages: the window is the agent's
`contextWindow`, else what the gateway says (the window an overflow answer named, its model
list's), else `AGENTS_CONTEXT_WINDOW_TOKENS`; the reply's room (`max_tokens` asked for) and the
tool definitions are taken off it (the reply's room at most half the window: a server such as
llama-cpp-python shortens `max_tokens` to what is left), and what is left is the history budget. The leading system
messages (the agent's instructions) and the last user turn with everything after it (the
round's own tool calls and results) are always sent; older turns are dropped oldest first, an
assistant's tool calls together with their results (a `tool` message never outlives its call).
Counting: the gateway's tokenize route (llama.cpp, vLLM, llama-cpp-python), else calibrated
from earlier answers' `usage.prompt_tokens`, else characters ÷ 3 (`agents.inference.count_tokens`).
A prompt whose bytes already fit is never counted (a token is at least one byte).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

from agents import inference
from agents_site.vocabulary import ChatRole

#: Tokens a chat template adds around each message (role markers), and the safety margin kept free.
PER_MESSAGE_TOKENS = 4
MARGIN_TOKENS = 16


@dataclass
class Fitted:
    """The messages to send, how many were dropped, the window and budget used, and how tokens were counted."""

    messages: list[dict]
    dropped: int
    window: int
    budget: int
    counted_by: str = ""


def window_for(agent, model: str) -> int:
    """Return the context window (tokens) a completion of `agent` on `model` must fit: the
    agent's `context_window`, at most what the gateway said; else the gateway's; else
    `AGENTS_CONTEXT_WINDOW_TOKENS`."""
    said = inference.context_window(model)
    own = getattr(agent, "context_window", None)
    if own:
        return min(own, said) if said else own
    return said or settings.AGENTS_CONTEXT_WINDOW_TOKENS


def _text(message: dict) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"], ensure_ascii=False)
    return text


def _groups(messages: list[dict]) -> list[list[int]]:
    """Return the indexes of `messages` in droppable groups: an assistant turn with tool calls and
    the tool results after it are one group; every other message is its own."""
    groups: list[list[int]] = []
    for index, message in enumerate(messages):
        if message.get("role") == ChatRole.TOOL and groups and (messages[groups[-1][0]].get("tool_calls")):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def fit(messages: list[dict], *, agent, model: str, max_tokens: int, tools: list[dict] | None = None) -> Fitted:
    """Return the messages to send so the prompt fits the window with `max_tokens` of room (see
    the module doc). Never drops the leading system messages nor the last user turn and what
    follows it; when even those do not fit they are sent as they are (the gateway's overflow
    answer then says so: `context_length_exceeded`)."""
    window = window_for(agent, model)
    tools_text = json.dumps(tools, ensure_ascii=False) if tools else ""
    budget = window - min(max_tokens, window // 2) - MARGIN_TOKENS  # the reply's room: at most half the window
    texts = [_text(m) for m in messages]
    overhead = PER_MESSAGE_TOKENS * len(messages)
    if sum(len(t.encode()) for t in texts) + len(tools_text.encode()) + overhead <= budget:
        return Fitted(list(messages), 0, window, budget)
    counts, how = inference.count_tokens(model, texts + ([tools_text] if tools_text else []))
    if tools_text:
        budget -= counts.pop()
    sizes = [count + PER_MESSAGE_TOKENS for count in counts]
    head = 0
    while head < len(messages) and messages[head].get("role") == ChatRole.SYSTEM:
        head += 1
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == ChatRole.USER), default=len(messages) - 1)
    tail_start = max(last_user, head)
    droppable = [g for g in _groups(messages) if g[0] >= head and g[-1] < tail_start]
    total = sum(sizes)
    dropped: set[int] = set()
    for group in droppable:
        if total <= budget:
            break
        dropped.update(group)
        total -= sum(sizes[i] for i in group)
    kept = [m for i, m in enumerate(messages) if i not in dropped]
    return Fitted(kept, len(dropped), window, budget, how)
