"""What the Responses API keeps in an org's store beside the run: the response's items and its stream.

Routed by `tenancy.db_router` to the current org's database (`responses_api` is an org app). A
response IS a run (`runs.models.Run`, kind `responses`): its status, output text, tokens, fee and
session are the run's. This row holds what the Responses wire format needs besides: the request's
settings (`metadata` among them), the input items and output items with their ids, and where the
response sits in a thread (`previous_response_id`, `conversation_id`, a chat conversation).
"""

from django.db import models


class StoredResponse(models.Model):
    """One stored response (`store: true`): the run `id` names, its request and its items.

    `request` is the checked request's settings as the `response` object shows them
    (`instructions`, `tools`, `tool_choice`, `text`, `temperature`, `top_p`,
    `max_output_tokens`, `parallel_tool_calls`, `metadata`, `background`, `store`). `input_items`
    and `output_items` are Responses API items (`message`, `function_call`,
    `function_call_output`) with their ids; `output_items` is `[]` until the run finished.
    `conversation_id` names the chat conversation (`chat.models.Conversation`) the response's turns
    are posted to; "" when the conversation was deleted meanwhile.
    """

    id = models.CharField(primary_key=True, max_length=64)  # the run's id
    model = models.CharField(max_length=64)  # the agent's name, as the caller sees it (`model`)
    conversation_id = models.CharField(max_length=64, default="", blank=True, db_index=True)
    previous_response_id = models.CharField(max_length=64, default="", blank=True)
    request = models.JSONField(default=dict)
    input_items = models.JSONField(default=list)
    output_items = models.JSONField(default=list)
    background = models.BooleanField(default=False)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.id} ({self.model})"


class ResponseEvent(models.Model):
    """One event of a background response's stream, kept so a client can resume it
    (`GET …/responses/{id}?stream=true&starting_after=N`). `body` is the event as sent
    (`{"type", "sequence_number", …}`); `sequence_number` is dense from 0 per response."""

    response_id = models.CharField(max_length=64)
    sequence_number = models.PositiveIntegerField()
    type = models.CharField(max_length=64)
    body = models.JSONField()

    class Meta:
        ordering = ["response_id", "sequence_number"]
        constraints = [models.UniqueConstraint(fields=["response_id", "sequence_number"], name="uq_response_event_seq")]

    def __str__(self) -> str:
        return f"{self.response_id} #{self.sequence_number} {self.type}"
