"""Turn conversations, turns and presets into their wire views (camelCase)."""

from __future__ import annotations

from agents_site.wire import compact, rfc3339
from chat.models import Conversation, Message
from chat.presets import Preset


def preset_view(preset: Preset) -> dict:
    """Return `{id, title, systemPrompt, serverExecuted, tools: [names]}`."""
    return {"id": preset.id, "title": preset.title, "systemPrompt": preset.system_prompt,
            "serverExecuted": preset.server_executed, "tools": preset.tool_names()}


def conversation_view(conversation: Conversation) -> dict:
    """Return a list row `{id, title, createdAt, updatedAt}`."""
    return {"id": conversation.id, "title": conversation.title, "createdAt": rfc3339(conversation.created_at),
            "updatedAt": rfc3339(conversation.updated_at)}


def message_view(message: Message) -> dict:
    """Return `{id, role, content, toolCalls?, runId?, finishReason?, createdAt}` (absent fields omitted);
    `finishReason` `stopped` marks a reply the user stopped (its words up to the stop)."""
    return compact({"id": message.id, "role": message.role, "content": message.content, "toolCalls": message.tool_calls,
                    "runId": message.run_id, "finishReason": message.finish_reason, "createdAt": rfc3339(message.created_at)},
                   keep=("content",))


def conversation_detail_view(conversation: Conversation, messages: list[Message]) -> dict:
    """Return `{conversationId, title, createdBy?, messages: [...]}`, the turns oldest first."""
    return compact({"conversationId": conversation.id, "title": conversation.title, "createdBy": conversation.created_by,
                    "messages": [message_view(m) for m in messages]}, keep=("title", "messages"))
