"""The built-in presets of POST /v1/agents/chat (reference §8.1), and how to add one.

A preset is what drives a round no agent drives: a title, a system prompt and its tools.

* `serverExecuted: true` — its tools are names of the platform's tool registry, executed here
  during the round; each call comes back as an action `{name, args, result|error}`.
* `serverExecuted: false` — its tools are OpenAI function definitions the *client* executes;
  the model's calls end the round and come back as ops `{name, args}`.

Built in:

* `assistant` (server-executed): a general assistant with the built-in tools this deployment
  offers (`current_time`, `calculator`, and `http_get` when `AGENTS_TOOL_HTTP_ALLOW` lists a host).
* `system` (client-executed): the platform's system agent (spec 001 guided creation). Its one
  tool, `open_form {form, agent?, title?, values?}`, asks the client to show a form; a handler
  registered for the preset (`guide`, see below) turns the forms it knows (spec 001's artifact
  subtypes) into artifacts and answers slash commands and artifact responses without a model.
  Add a function to `SYSTEM_FUNCTIONS` to give the preset another client action.

The presets are a fixed set, `_PRESETS` at the end of this module: add one there (ids are unique).

`register_preset_handler(preset_id, handler)` lets a higher app (which chat must not import)
drive a preset's rounds: `handler.answer(...)` may answer a round itself — a `FixedReply`, no
model called, no inference needed — and `handler.expand_ops(...)` rewrites the ops a model's
round hands back (both run inside the org context).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from django.conf import settings

from agents.tools.backends.builtin import BUILTIN_NAMES

DEFAULT_PRESET = "assistant"


@dataclass(frozen=True)
class Preset:
    """One preset: `id` (the request's `preset`), `title`, `system_prompt`, whether its tools run
    here (`server_executed`), and its tools — registry names when server-executed
    (`server_tools`), OpenAI function definitions when the client executes them (`functions`)."""

    id: str
    title: str
    system_prompt: str
    server_executed: bool
    server_tools: tuple[str, ...] = ()
    functions: tuple[dict, ...] = field(default_factory=tuple)

    def tool_names(self) -> list[str]:
        """Return the names of the tools a round of this preset offers now (server tools that are off are left out)."""
        if self.server_executed:
            return [name for name in self.server_tools if name != "http_get" or settings.AGENTS_TOOL_HTTP_ALLOW]
        return [function["function"]["name"] for function in self.functions]


SYSTEM_FORMS = ("agent_creation_form", "agent_update_form", "agent_deletion_confirm", "agent_token_rotate_confirm",
                "agent_list_display")  # the artifact subtypes (ArtifactSubtype.FORMS) the model may open

SYSTEM_FUNCTIONS: tuple[dict, ...] = (
    {
        "type": "function",
        "function": {
            "name": "open_form",
            "description": "Ask the client to show the user a form or card. agent_creation_form creates an agent; "
                           "agent_update_form, agent_deletion_confirm and agent_token_rotate_confirm act on the agent "
                           "named in `agent`; agent_list_display shows the user's agents. The client does the rest "
                           "with the user's own credentials and reports back.",
            "parameters": {
                "type": "object",
                "properties": {
                    "form": {"type": "string", "description": "which form to show: one of " + ", ".join(SYSTEM_FORMS)},
                    "agent": {"type": "string", "description": "the agent's id or custom_id (update, delete, rotate)"},
                    "title": {"type": "string", "description": "a heading for the form"},
                    "values": {"type": "object", "description": "values to prefill, by field name (e.g. display_name)"},
                },
                "required": ["form"],
            },
        },
    },
)


@dataclass(frozen=True)
class FixedReply:
    """A round a preset handler answers itself: the `reply` text and the `ops` (`[{name, args}]`)."""

    reply: str
    ops: list = field(default_factory=list)


class PresetHandler(Protocol):
    """What a higher app registers to drive a preset's rounds (see `register_preset_handler`)."""

    def answer(self, *, messages: list[dict], subject: str) -> FixedReply | None:
        """Return the round's fixed answer for the caller's checked `messages` (`[{role, content}]`), or
        None to let the model answer. `subject` is the calling user. May raise an `ApiError` (4xx: the
        round is refused, nothing stored). Org context; runs before the round's run starts."""

    def expand_ops(self, ops: list[dict], *, subject: str) -> list[dict]:
        """Return the ops a model's round hands back, rewritten (e.g. a form name into its artifact)."""


_HANDLERS: dict[str, PresetHandler] = {}


def register_preset_handler(preset_id: str, handler: PresetHandler) -> None:
    """Let `handler` drive the rounds of preset `preset_id` (one handler per preset; the last wins)."""
    _HANDLERS[preset_id] = handler


def preset_handler(preset_id: str) -> PresetHandler | None:
    """Return the handler registered for preset `preset_id`, or None."""
    return _HANDLERS.get(preset_id)

def preset_get(preset_id: str) -> Preset | None:
    """Return the preset of id `preset_id`, or None."""
    return _PRESETS.get(preset_id)


def preset_list() -> list[Preset]:
    """Return every preset, sorted by id."""
    return [_PRESETS[key] for key in sorted(_PRESETS)]


def preset_ids() -> list[str]:
    """Return every preset id, sorted (the request's `preset` enum)."""
    return sorted(_PRESETS)


_ASSISTANT = Preset(
    id="assistant",
    title="Assistant",
    system_prompt="You are a helpful assistant. Answer clearly and briefly. Use a tool when it gives a better answer "
                  "than guessing (the time, arithmetic), and say so when you do not know.",
    server_executed=True,
    server_tools=BUILTIN_NAMES,
)
_SYSTEM = Preset(
    id="system",
    title="System agent",
    system_prompt="You are the platform's system agent: you help the user create and manage their identity agents "
                  "(agents whose code runs on the user's own host; platform agents, which this platform runs with a model, "
                  "are managed on the console's Platform agents page, not by you). When the "
                  "user wants to create, change, delete an agent, rotate its token or see their agents, call open_form "
                  "with the form's name (and the agent, and the values you already know) instead of asking for each "
                  "field in prose. The client calls the platform with the user's own credentials and reports back; "
                  "never ask for a token or a private key. Slash commands: /create-agent, /list-agents, "
                  "/update-agent <agent>, /delete-agent <agent>, /rotate-token <agent>.",
    server_executed=False,
    functions=SYSTEM_FUNCTIONS,
)

#: Every preset by id: a fixed set, written here (issue 48 item 4: no registry where a literal does).
_PRESETS: dict[str, Preset] = {preset.id: preset for preset in (_ASSISTANT, _SYSTEM)}
