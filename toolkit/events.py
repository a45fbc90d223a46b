"""The session events a run writes, shaped once for the server and the runner (issue 27 item 1).

A run on the server (`agents.execution.loop`) and a routed run on a machine (`runner.execute`)
append the same turns to their session: the text of a message cut to a preview, and a
`tool-call` event per call the model asked for. Both build them here, so an event reads the
same whichever side ran the run — and a run resumed after an approval (issue 28) is rebuilt
from events of one shape.

Sizes are UTF-8 bytes. An event's payload may hold 64 KiB of compact JSON on the server
(`sessions.fields.dump_payload`); `tool_call_payload` keeps a call's event under
`EVENT_BUDGET_BYTES`.
"""

from __future__ import annotations

import json

from toolkit.toolloop import parsed_arguments

#: A message's text kept in its event (event payloads stay well under the 64 KiB an event may hold).
TEXT_PREVIEW_BYTES = 16 * 1024
#: A tool-call event keeps the arguments and the result as the model wrote and read them (both
#: already bounded by `toolkit.invoke`), so a run resumed from its log (issue 28) rebuilds the
#: conversation it had; only an event that would not fit `EVENT_BUDGET_BYTES` (under the 64 KiB
#: an event may hold) is cut to the preview sizes.
EVENT_PREVIEW_BYTES = 4 * 1024
EVENT_BUDGET_BYTES = 60 * 1024


def clip(text: str, limit: int = TEXT_PREVIEW_BYTES) -> str:
    """Return `text` cut to `limit` UTF-8 bytes (whole characters), with "…" appended when cut.

    Example: ("héllo", 2) → "h…" (the "é" would need bytes 2–3).
    """
    raw = (text or "").encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore") + "…"


def valid_text(text: str | None) -> str:
    """Return `text` as valid UTF-8 ("" for None): a gateway may send a lone surrogate escape
    (`"\\ud800"`), which no store, event or response can encode (the server refuses it, 400); it
    becomes `?`."""
    return (text or "").encode("utf-8", "replace").decode("utf-8")


def arguments_for_event(raw: str, limit: int | None):
    """Return a call's raw arguments for its event: the decoded JSON when they parse and fit
    `limit` bytes (None: any size), else the text cut to `limit`.

    Example: ('{"q": 1}', None) → {"q": 1}; ("not json", None) → "not json"; ('{"q": "abcdefgh"}', 8) → '{"q": "a…'.
    """
    try:
        return json.loads(raw) if limit is None or len(raw.encode()) <= limit else clip(raw, limit)
    except json.JSONDecodeError:
        return raw if limit is None else clip(raw, limit)


def tool_call_payload(*, name: str, raw_arguments: str, result: str, failed: bool, round_no: int, call_id: str, run_id: str) -> dict:
    """Return the `tool-call` event of one call: its arguments (as JSON when they parse) and result.

    Whole — what the model wrote and read (the arguments are bounded by the tools' 32 KiB, the
    result by their 16 KiB, and on the server then masked, which may lengthen it), so a resumed
    run's rebuild (`agents.execution.resume.rebuild`) hands the model the same turn — and cut to
    `EVENT_PREVIEW_BYTES` each only when the compact JSON would pass `EVENT_BUDGET_BYTES`
    (escaping can grow text up to sixfold). The server passes `raw_arguments` and `result`
    already masked; the runner passes them as they are (the server refuses an event carrying a
    credential). Out: `{name, arguments, result, error, round, toolCallId, runId}`.
    """
    for arguments_limit, result_limit in ((None, None), (EVENT_PREVIEW_BYTES, EVENT_PREVIEW_BYTES)):
        kept = result if result_limit is None else clip(result, result_limit)
        payload = {"name": name, "arguments": arguments_for_event(raw_arguments, arguments_limit), "result": kept,
                   "error": failed, "round": round_no, "toolCallId": call_id, "runId": run_id}
        if len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()) <= EVENT_BUDGET_BYTES:
            break
    return payload


#: A coding run's turns keep 4 KiB previews of a call's arguments and result, of a commit's diffstat
#: and of a command a stop killed (the commits hold the work); a commit's patch keeps 16 KiB.
CODING_PREVIEW_BYTES = 4 * 1024
PATCH_PREVIEW_BYTES = 16 * 1024


def coding_call_payload(*, name: str, raw_arguments: str, result: str, failed: bool, turn_no: int, run_id: str) -> dict:
    """Return the `tool-call` event of one coding tool call, as the server's engine and a machine both write it.

    In: the call's raw JSON arguments and its result text (valid UTF-8). Out: `{name, arguments, result,
    error, round, runId}` — `arguments` the decoded object (`{}` when not a JSON object) while the raw text
    fits `CODING_PREVIEW_BYTES`, else that text cut to it; `result` cut to it.
    """
    arguments = parsed_arguments(raw_arguments) if len(raw_arguments.encode()) <= CODING_PREVIEW_BYTES else clip(raw_arguments, CODING_PREVIEW_BYTES)
    return {"name": name, "arguments": arguments, "result": clip(result, CODING_PREVIEW_BYTES), "error": failed, "round": turn_no, "runId": run_id}


def commit_payload(*, subject: str, sha: str, diffstat: str, turn: int, branch: str, patch: str, run_id: str) -> dict:
    """Return the `commit` event of one turn's commit: `{text, commit, subject, diffstat, turn, branch, patch, runId}`,
    the diffstat cut to `CODING_PREVIEW_BYTES` and the patch to `PATCH_PREVIEW_BYTES`."""
    return {"text": subject, "commit": sha, "subject": subject, "diffstat": clip(diffstat, CODING_PREVIEW_BYTES), "turn": turn,
            "branch": branch, "patch": clip(patch, PATCH_PREVIEW_BYTES), "runId": run_id}


def stopped_command(*, name: str, command: str, output: str) -> dict:
    """Return what a run keeps of a command a stop killed: `{name, command, output}` (what it printed so
    far), each text cut to `CODING_PREVIEW_BYTES`. The server passes them masked."""
    return {"name": name, "command": clip(command, CODING_PREVIEW_BYTES), "output": clip(output, CODING_PREVIEW_BYTES)}
