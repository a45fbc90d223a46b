"""Errors of the Responses API, rendered as OpenAI's error object (`openai_api.errors.error_response`)."""

from __future__ import annotations

from agents_site.errors import NotFound


class ResponseNotFound(NotFound):
    """404: no stored response of that id in the org (another org's, a deleted one, `store: false` — the same 404).

    `param` names the request field that named it (`response_id`, `previous_response_id`).
    """

    def __init__(self, response_id: str, *, param: str = "response_id") -> None:
        super().__init__(f"No response with id '{response_id[:64]}' found.")
        self.param = param


class ConversationNotFound(NotFound):
    """404: `conversation` names no chat conversation of the org."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"No conversation with id '{conversation_id[:64]}' found.")
        self.param = "conversation"
