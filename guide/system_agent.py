"""The system agent (spec 001 "注册协议", Option C): it orchestrates, the client acts.

It drives the chat preset `system`. It never holds the user's credential and never writes an
identity agent: it sends artifact forms, the client calls the identity API with the user's own
credential (and the new agent's token), then reports back with an `artifact_response` on the
same conversation — the system agent's inbox — which it acknowledges.

Answered here without a model (`answer`; a recorded `chat` run all the same):

* slash commands (the last message is a user turn starting with "/"): `/create-agent [name]`,
  `/list-agents`, `/update-agent <agent>`, `/delete-agent <agent>` (the cascade preview from
  the identity app), `/rotate-token <agent>`, `/help`; an unknown command gets the help;
* an artifact response (the last user turn is the JSON message
  `{"msg_subtype": "artifact_response", "artifact": {"subtype": "agent_created", "payload": {...}}}`):
  its payload may carry only the subtype's allowed fields (`guide.artifacts.ALLOWED_FIELDS`);
  a forbidden field (a token, a private key, a webhook secret) or any other is 400 and nothing
  is stored. The answer: "✓ created {display_name} ({custom_id}). …".

Free text goes to the model, whose `open_form {form, agent?, values?}` calls are turned into
the same artifacts (`expand_ops`). Agents are looked up among the calling user's own (another
user's agent reads as unknown), by display name, custom id or id (`identity_find_owned`; a
name several of them share answers the list of those to choose from), and named to the user
one way everywhere: "Echo (echo_bot)", display name and custom id, as the identity pages show.
"""

from __future__ import annotations

import json

from agents_site.errors import InvalidRequest, NotFound
from agents_site.vocabulary import ArtifactSubtype, ChatRole, MsgSubtype, SystemCommand
from chat.presets import FixedReply
from guide import artifacts, field_names
from agents.selectors import platform_agent_count
from identity import selectors as identity_selectors

SYSTEM_PRESET = "system"
MAX_PAYLOAD_VALUE = 128  # characters of one artifact_response payload value

# "Identity agent": an agent whose brain runs on its owner's host (this agent manages those);
# "platform agent": one this platform runs with a model (the console's Platform agents page).
HELP = ("I create and manage your identity agents: agents whose code runs on your own host, with an identity, a token "
        "and keys from this platform. (Platform agents, which this platform runs with a model, are on the Platform agents "
        "page.) Commands: /create-agent [name], /list-agents, /update-agent <agent>, /delete-agent <agent>, "
        "/rotate-token <agent> (an agent by its name or custom id) — or just tell me what you need.")


def _identity_agents(count: int) -> str:
    return f"{count} identity agent{'' if count == 1 else 's'}"


def _list_sentence(count: int) -> str:
    """Say how many identity agents the user has, and that platform agents are counted apart.

    Example: 0 identity agents, 2 platform agents → "You have no identity agents yet. /create-agent
    makes one. This org also has 2 platform agents (run by this platform); they are on the
    Platform agents page, not here."
    """
    said = f"You have {_identity_agents(count)}." if count else "You have no identity agents yet. /create-agent makes one."
    platform = platform_agent_count()
    if platform:
        said += (f" This org also has {platform} platform agent{'' if platform == 1 else 's'} (run by this platform); "
                 f"{'it is' if platform == 1 else 'they are'} on the Platform agents page, not here.")
    return said


def _count(n: int, noun: str) -> str:
    """Return "1 relation", "2 relations", "0 users" (no "(s)" in what users read)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _last_user_text(messages: list[dict]) -> str | None:
    if not messages or messages[-1]["role"] != ChatRole.USER:
        return None
    return messages[-1]["content"]


def _owned(ref: str, subject: str):
    try:
        return identity_selectors.identity_get_owned(ref=ref, creator_id=subject)
    except NotFound:
        return None


def _shown(profile) -> str:
    """Return how an identity agent is named to its user: "Echo (echo_bot)", its display name and
    custom id — the id the console's identity pages show and a command accepts."""
    return f"{profile.display_name} ({profile.agent.name})"


def _list_op(subject: str) -> tuple[list, dict]:
    profiles = identity_selectors.identity_list(creator_id=subject)
    keys = identity_selectors.valid_keysets(agent_ids=[p.agent_id for p in profiles])
    return profiles, artifacts.as_op(artifacts.list_display(profiles, keyed={a for a, sets in keys.items() if sets}))


def artifact_for(form: str, *, subject: str, agent_ref: str = "", values: dict | None = None) -> tuple[str, dict | None]:
    """Return `(sentence, op)` showing artifact `form` (an `ArtifactSubtype.FORMS` value) for `subject`.

    An action on an agent without `agent_ref`, or with one that is not the user's, answers a
    sentence and the user's agent list instead. Org context required.
    """
    if form == ArtifactSubtype.AGENT_CREATION_FORM:
        return "Fill in the form to create an identity agent. Its keys are made in your browser; the platform never sees the private halves.", \
            artifacts.as_op(artifacts.creation_form(values=values))
    if form == ArtifactSubtype.AGENT_LIST_DISPLAY:
        profiles, op = _list_op(subject)
        return _list_sentence(len(profiles)), op
    command = {ArtifactSubtype.AGENT_UPDATE_FORM: SystemCommand.UPDATE_AGENT, ArtifactSubtype.AGENT_DELETION_CONFIRM: SystemCommand.DELETE_AGENT,
               ArtifactSubtype.AGENT_TOKEN_ROTATE_CONFIRM: SystemCommand.ROTATE_TOKEN}[form]
    # The agent by the name the user gave it, its custom id or its id (issue 57).
    matches = identity_selectors.identity_find_owned(ref=agent_ref, creator_id=subject) if agent_ref else []
    if len(matches) > 1:
        keys = identity_selectors.valid_keysets(agent_ids=[p.agent_id for p in matches])
        op = artifacts.as_op(artifacts.list_display(matches, keyed={a for a, sets in keys.items() if sets}))
        return (f"{len(matches)} of your identity agents are named '{agent_ref}': choose one below, or say "
                f"{command.value} <custom id>."), op
    profile = matches[0] if matches else None
    if profile is None:
        _, op = _list_op(subject)
        said = f"No identity agent '{agent_ref}' among yours." if agent_ref else "Which identity agent?"
        return f"{said} Say {command.value} <name or custom id>.", op
    if form == ArtifactSubtype.AGENT_UPDATE_FORM:
        return f"Change {_shown(profile)} below.", artifacts.as_op(artifacts.update_form(profile))
    if form == ArtifactSubtype.AGENT_DELETION_CONFIRM:
        preview = identity_selectors.deletion_preview(agent_id=profile.agent_id)
        return (f"Deleting {_shown(profile)} ends {_count(preview['affected_h2a_count'], 'relation')} with "
                f"{_count(preview['affected_users_count'], 'user')}; each is alerted. Confirm below."), \
            artifacts.as_op(artifacts.deletion_confirm(profile, preview=preview))
    return (f"Rotate the token of {_shown(profile)}: the old token and keys stay valid for the grace "
            f"period, or are revoked now in an emergency."), artifacts.as_op(artifacts.rotate_confirm(profile))


COMMAND_FORMS = {
    SystemCommand.CREATE_AGENT: ArtifactSubtype.AGENT_CREATION_FORM,
    SystemCommand.LIST_AGENTS: ArtifactSubtype.AGENT_LIST_DISPLAY,
    SystemCommand.UPDATE_AGENT: ArtifactSubtype.AGENT_UPDATE_FORM,
    SystemCommand.DELETE_AGENT: ArtifactSubtype.AGENT_DELETION_CONFIRM,
    SystemCommand.ROTATE_TOKEN: ArtifactSubtype.AGENT_TOKEN_ROTATE_CONFIRM,
}


def command_reply(text: str, *, subject: str) -> FixedReply:
    """Answer slash command `text` (e.g. "/delete-agent weather_bot") for `subject`. Org context required."""
    word, _, rest = text.strip().partition(" ")
    argument = rest.strip()
    form = COMMAND_FORMS.get(word.lower())
    if form is None:
        return FixedReply(reply=HELP if word.lower() == SystemCommand.HELP else f"Unknown command {word[:40]}. {HELP}")
    values = {"display_name": argument} if form == ArtifactSubtype.AGENT_CREATION_FORM and argument else None
    # The whole argument names the agent: a display name may hold spaces ("/rotate-token Invoice Bot").
    sentence, op = artifact_for(form, subject=subject, agent_ref=argument[:128], values=values)
    return FixedReply(reply=sentence, ops=[op] if op else [])


def parse_response(text: str) -> dict | None:
    """Return the artifact_response message `text` holds, or None when it is not one (then the model answers).

    400 when it is one but malformed: an artifact subtype that is not a response, a payload
    that is not an object, a field outside the subtype's allowed fields (a forbidden one named
    as such, its value never echoed; forbidden is decided after NFKC and look-alike folding,
    `guide.field_names`, so `agent_tokеn` with a Cyrillic е is one), a field name outside
    `[a-z0-9_]`, a value that is not a short string (or, for `emergency`, a boolean), no `agent_id`.
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        message = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("msg_subtype") != MsgSubtype.ARTIFACT_RESPONSE:
        return None
    artifact = message.get("artifact")
    subtype = artifact.get("subtype") if isinstance(artifact, dict) else None
    if subtype not in ArtifactSubtype.RESPONSES:
        raise InvalidRequest(f"artifact_response subtype must be one of {', '.join(sorted(ArtifactSubtype.RESPONSES))}")
    unknown = sorted(set(artifact) - {"subtype", "payload"})
    if unknown:
        raise InvalidRequest(f"artifact_response carries an unknown key: {unknown[0]}")
    payload = artifact.get("payload")
    if not isinstance(payload, dict):
        raise InvalidRequest("artifact_response payload must be an object")
    allowed = artifacts.ALLOWED_FIELDS[subtype]
    for name in sorted(payload):
        if field_names.forbidden(name, artifacts.FORBIDDEN_FIELDS):  # after NFKC and look-alike folding
            raise InvalidRequest(f"artifact_response must not carry {field_names.fold(name)[:40]}: it is a forbidden field")
        if not field_names.FIELD_NAME.fullmatch(name):
            shown = name.encode("unicode_escape").decode()[:60]
            raise InvalidRequest(f"artifact_response field name {shown} must match {field_names.FIELD_NAME_RULE}")
        if name not in allowed:
            raise InvalidRequest(f"artifact_response field not allowed: {name[:40]} (allowed: {', '.join(allowed)})")
    for name, value in payload.items():
        ok = isinstance(value, bool) if name == "emergency" else isinstance(value, str) and 0 < len(value) <= MAX_PAYLOAD_VALUE
        if not ok:
            raise InvalidRequest(f"artifact_response field {name} must be " + ("a boolean" if name == "emergency" else "a short string"))
    if "agent_id" not in payload:
        raise InvalidRequest("artifact_response payload needs agent_id")
    return {"subtype": subtype, "payload": payload}


def response_reply(response: dict, *, subject: str) -> FixedReply:
    """Acknowledge a checked artifact response (spec 001 step 9) from what is stored, not from what was claimed."""
    subtype, payload = response["subtype"], response["payload"]
    agent_id = payload["agent_id"]
    profile = _owned(agent_id, subject)
    if subtype == ArtifactSubtype.AGENT_DELETED:
        if profile is not None:
            return FixedReply(reply=f"{_shown(profile)} still exists: the delete did not go through.")
        return FixedReply(reply=f"✓ deleted {payload.get('display_name', agent_id)}. Its relations were ended "
                                "and every affected user was alerted.")
    if profile is None:
        return FixedReply(reply=f"I cannot find identity agent {agent_id} among yours.")
    if subtype == ArtifactSubtype.AGENT_CREATED:
        return FixedReply(reply=f"✓ created {_shown(profile)}. Deploy the agent's code to your host: it connects with its "
                                "token and the keys you saved.")
    if subtype == ArtifactSubtype.AGENT_UPDATED:
        return FixedReply(reply=f"✓ updated {_shown(profile)}.")
    how = "revoked the old token and keys now" if payload.get("emergency") else "the old token and keys stay valid for the grace period"
    return FixedReply(reply=f"✓ rotated the token of {_shown(profile)}; {how}. Register the agent's public keys again with the new token.")


class SystemAgent:
    """The handler of the `system` preset (`chat.presets.PresetHandler`)."""

    def answer(self, *, messages: list[dict], subject: str) -> FixedReply | None:
        """Answer a slash command or an artifact response without a model; None for anything else."""
        text = _last_user_text(messages)
        if text is None:
            return None
        if text.lstrip().startswith("/"):
            return command_reply(text.strip(), subject=subject)
        response = parse_response(text)
        return response_reply(response, subject=subject) if response is not None else None

    def expand_ops(self, ops: list[dict], *, subject: str) -> list[dict]:
        """Turn each `open_form` call naming an artifact form into that artifact; leave other ops as they are."""
        expanded = []
        for op in ops:
            args = op.get("args") if isinstance(op.get("args"), dict) else {}
            form = args.get("form")
            if op.get("name") == "open_form" and form in ArtifactSubtype.FORMS:
                agent = args.get("agent") if isinstance(args.get("agent"), str) else ""
                values = args.get("values") if isinstance(args.get("values"), dict) else None
                _, artifact_op = artifact_for(form, subject=subject, agent_ref=agent.strip()[:128], values=values)
                expanded.append(artifact_op)
            else:
                expanded.append(op)
        return expanded
