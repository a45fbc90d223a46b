"""The built-in presets of POST /v1/agents/chat (reference §8.1), and how to add one.

A preset is what drives a round no agent drives: a title, a system prompt and its tools.

* `serverExecuted: true` — its tools are names of the platform's tool registry, executed here
  during the round; each call comes back as an action `{name, args, result|error}`.
* `serverExecuted: false` — its tools are OpenAI function definitions the *client* executes;
  the model's calls end the round and come back as ops `{name, args}`.

Built in:

* `assistant` (server-executed): a general assistant with the built-in tools this deployment
  offers (`current_time`, `calculator`, and `http_get` when `AGENTS_TOOL_HTTP_ALLOW` lists a host).
* `system` (client-executed): the platform's guide. Its one tool, `open_form
  {form, title?, values?}`, asks the client to show a form (`form` names it, `values` prefills
  it); the client sends what the user submitted back as a `tool` message in the next round.
  The forms themselves (agent creation and the like) come with guided creation; add a function
  to `SYSTEM_FUNCTIONS` to give the preset another client action.

`register_preset(Preset(...))` adds one (e.g. from an `AppConfig.ready()`); ids are unique.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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


SYSTEM_FUNCTIONS: tuple[dict, ...] = (
    {
        "type": "function",
        "function": {
            "name": "open_form",
            "description": "Ask the client to show the user a form. The client answers with what the user submitted.",
            "parameters": {
                "type": "object",
                "properties": {
                    "form": {"type": "string", "description": "which form to show, e.g. create_agent"},
                    "title": {"type": "string", "description": "a heading for the form"},
                    "values": {"type": "object", "description": "values to prefill, by field name"},
                },
                "required": ["form"],
            },
        },
    },
)

_PRESETS: dict[str, Preset] = {}


def register_preset(preset: Preset) -> None:
    """Add `preset` to the registry; raise `ValueError` when its id is taken."""
    if preset.id in _PRESETS:
        raise ValueError(f"preset {preset.id!r} is already registered")
    _PRESETS[preset.id] = preset


def preset_get(preset_id: str) -> Preset | None:
    """Return the preset of id `preset_id`, or None."""
    return _PRESETS.get(preset_id)


def preset_list() -> list[Preset]:
    """Return every preset, sorted by id."""
    return [_PRESETS[key] for key in sorted(_PRESETS)]


def preset_ids() -> list[str]:
    """Return every preset id, sorted (the request's `preset` enum)."""
    return sorted(_PRESETS)


register_preset(Preset(
    id="assistant",
    title="Assistant",
    system_prompt="You are a helpful assistant. Answer clearly and briefly. Use a tool when it gives a better answer "
                  "than guessing (the time, arithmetic), and say so when you do not know.",
    server_executed=True,
    server_tools=BUILTIN_NAMES,
))
register_preset(Preset(
    id="system",
    title="System agent",
    system_prompt="You are the platform's system agent: you help the user set things up. When the user should fill "
                  "something in, call open_form with the form's name and the values you already know instead of "
                  "asking for each field in prose. The result comes back as a tool message.",
    server_executed=False,
    functions=SYSTEM_FUNCTIONS,
))
