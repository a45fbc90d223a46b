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
from pydantic import Field, WithJsonSchema

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
