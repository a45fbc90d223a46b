"""Wire shapes every app shares, and the helpers that make the OpenAPI document exact.

The services stay the judges of a request (their messages and order are the reference's);
these helpers only declare in the OpenAPI document what the services enforce: the words of an
enumerated field (taken from `agents_site.vocabulary`, never re-spelled), lengths, patterns and
formats. A declared rule the server does not hold, or a held rule the document does not
declare, is what the contract test (schemathesis over a live server) reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any

from ninja import Schema
from pydantic import ConfigDict, Field, WithJsonSchema

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ErrorCode


def declare(*, on: str = "string", **keywords: Any) -> Callable[[dict], None]:
    """Return a pydantic `json_schema_extra` hook adding JSON Schema `keywords` to a field.

    The keywords land on the branch of type `on` (for `str | None`, the string branch, so
    `null` stays allowed: a JSON null is an omitted field), or on the field itself when it has
    one type. Validation is untouched: the service that reads the field enforces the rule.
    Example: `Field(None, json_schema_extra=declare(maxLength=128))` on `str | None` gives
    `{"anyOf": [{"type": "string", "maxLength": 128}, {"type": "null"}]}`.
    """

    def apply(schema: dict) -> None:
        branches = schema.get("anyOf", [schema])
        for branch in branches:
            if branch.get("type") == on:
                branch.update(keywords)

    return apply


def words(choices: Iterable) -> list[str]:
    """Return the wire words of a vocabulary enum (or any iterable of words), in order."""
    values = getattr(choices, "values", None)
    return [str(w) for w in (values if values is not None else choices)]


def choice(choices: Iterable, default: Any = None, *, description: str | None = None, **keywords: Any) -> Any:
    """A field declared as an enum of the vocabulary's `choices` in the OpenAPI document."""
    return Field(default, description=description, json_schema_extra=declare(enum=words(choices), **keywords))


def text(default: Any = None, *, description: str | None = None, **keywords: Any) -> Any:
    """A string field with declared JSON Schema `keywords` (`maxLength`, `pattern`, `format`…)."""
    return Field(default, description=description, json_schema_extra=declare(**keywords) if keywords else None)


def word_param(choices: Iterable) -> Any:
    """Return the type of an optional query parameter documented as an enum of `choices`.

    Example: `def list_runs(request, status: word_param(RunStatus) = None)` documents
    `?status=` as `{"type": "string", "enum": ["queued", "running", "ok", "error"]}`; the
    selector still judges the value (and answers an unknown word with its own 400).
    """
    return Annotated[str | None, WithJsonSchema({"type": "string", "enum": words(choices)})]


class BodySchema(Schema):
    """Base of every request body of `/v1/agents` (and of each object nested in one).

    One rule for every write (issue 29, "the schemas say what is enforced"): a field the schema
    does not declare is refused with 400 `invalid_request` naming it (`fields[].field` is its
    path, `message` "unknown field"), and the OpenAPI document declares it as
    `additionalProperties: false`. A subclass keeps the rule when it sets its own
    `model_config` (pydantic merges configs). A new body schema inherits it by subclassing this
    class instead of `ninja.Schema`; a route reading its raw body itself calls
    `refuse_unknown_fields` with its schema.
    """

    model_config = ConfigDict(extra="forbid")


def refuse_unknown_fields(body: dict, schema: type[Schema], *, prefix: str = "") -> None:
    """Raise `InvalidRequest` (400) naming the first keys of `body` that `schema` does not declare.

    For routes that read their raw body (they declare `schema` in the document with
    `additionalProperties: false`). Example: `{"kind": "message", "paylod": {}}` against
    `EventIn` → "invalid request: paylod: unknown field".
    """
    known = set(schema.model_fields) | {f.alias for f in schema.model_fields.values() if f.alias}
    unknown = sorted(str(key) for key in body if key not in known)
    if unknown:
        fields = [{"field": f"{prefix}{name}", "message": UNKNOWN_FIELD} for name in unknown]
        raise InvalidRequest(f"invalid request: {fields[0]['field']}: {UNKNOWN_FIELD}", fields=fields)


#: The message naming a field a body schema does not declare.
UNKNOWN_FIELD = "unknown field"


class ErrorOut(Schema):
    """The one error shape: `status` (the HTTP status), `code` (a stable word) and `error` (a
    sentence); some errors add named fields, such as `fields` on a validation error."""

    status: int
    code: str = choice(ErrorCode, ...)
    error: str


def required_in_docs(*names: str) -> Callable[[dict, type], None]:
    """Return a model-level `json_schema_extra` hook publishing `names` as required, non-null.

    The fields stay optional for pydantic so the service answers a missing one with its own
    message (`"name is required"`, a 400 like any validation error); the document says what a
    client must send. Use as `model_config = ConfigDict(json_schema_extra=required_in_docs("name"))`.
    """

    def apply(schema: dict, model: type | None = None) -> None:
        required = schema.setdefault("required", [])
        for name in names:
            if name not in required:
                required.append(name)
            prop = schema.get("properties", {}).get(name)
            if prop is not None and "anyOf" in prop:
                kept = [b for b in prop.pop("anyOf") if b.get("type") != "null"]
                prop.pop("default", None)
                if len(kept) == 1:
                    prop.update(kept[0])
                else:
                    prop["anyOf"] = kept

    return apply


def sse_frame(event: str, data: dict) -> dict:
    """One Server-Sent Event as schemathesis and OpenAPI 3.1 read it: `event` and its JSON `data`."""
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {"event": {"const": str(event)}, "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": data}},
    }


def stream_schema(title: str, description: str, frames: list[dict]) -> dict:
    """Return the schema of a `text/event-stream` answer: one of `frames` (each `sse_frame`).

    `title` names it: `agents_site.openapi.complete` publishes it as its own component
    (`#/components/schemas/<title>`), so a stream's frames are a schema of the document like any
    body, not prose.
    """
    return {"title": title, "description": description, "oneOf": frames}
