"""The chat page: talk to an agent or a preset, with conversations kept by the org.

Drawn by `static/console/chat.js` from the JSON API with the session cookie: presets
(`GET /v1/agents/chat/presets`), agents (`GET /v1/agents`), conversations
(`GET /v1/agents/chat/conversations[/{id}]`), a round (`POST /v1/agents/chat` with
`stream: true`, its reply streaming in) and the stop (`POST /v1/agents/sessions/{id}/stop`).
"""

from __future__ import annotations

from django.shortcuts import render

from agents_site.vocabulary import ShareSubject
from console.access import member_required
from console.shares import share_context
from guide import field_names


@member_required
def chat(request, conversation_id: str = ""):
    """Show the chat page, opened on `conversation_id` when given (the script reads it; an
    unknown or foreign id is answered 404 by the API and the page says so). The page carries the
    look-alike table the client_action executor folds field names with (`guide.field_names`), and
    the share panel of the open conversation (`static/console/shares.js`)."""
    return render(request, "console/chat.html", {"conversation_id": conversation_id, "nav": "chat",
                                                 "field_fold": field_names.fold_table(), **share_context(ShareSubject.CONVERSATION)})
