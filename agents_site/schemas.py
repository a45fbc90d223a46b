"""Wire shapes every app shares, and the helpers that make the OpenAPI document exact.

The services stay the judges of a request (their messages and order are the reference's);
these helpers only declare in the OpenAPI document what the services enforce: the words of an
enumerated field (taken from `agents_site.vocabulary`, never re-spelled), lengths, patterns and
formats. A declared rule the server does not hold, or a held rule the document does not
declare, is what the contract test (schemathesis over a live server) reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Annotated, Any, ClassVar

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

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


#: An id or a name a caller refers to (an agent by id or name): a letter, digit or `_`, then letters,
#: digits, `.`, `_`, `-`, at most 128 characters. No `/`, no markup, no spaces, nothing a path
#: segment or a page could be broken by.
REF_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$"


def minted_pattern(prefix: str) -> str:
    """Return the pattern of an id the platform mints with `prefix` (`agents_site.ids.mint_id`).

    `minted_pattern("sess") == r"^sess_[0-9a-f]{32}$"`.
    """
    return rf"^{prefix}_[0-9a-f]{{32}}$"


def id_field(pattern: str, *, description: str, blank: bool = True) -> Any:
    """An optional id-like string field that must match `pattern` (issue 29: every id-like field has a pattern).

    Enforced (a value that does not match is 400 `invalid_request` naming the field, before the
    route runs) and declared (`pattern` in the OpenAPI document). `blank=True` also admits "",
    which the services read as "none" (a target detached, a new conversation).
    Example: `id_field(minted_pattern("tgt"), description="…")` refuses `"../x"` and `"tgt_x"`.
    """
    return Field(None, description=description, pattern=f"^$|{pattern}" if blank else pattern)


def word_param(choices: Iterable) -> Any:
    """Return the type of an optional query parameter documented as an enum of `choices`.

    Example: `def list_runs(request, status: word_param(RunStatus) = None)` documents
    `?status=` as `{"type": "string", "enum": ["queued", "running", "ok", "error"]}`; the
    selector still judges the value (and answers an unknown word with its own 400).
    """
    return Annotated[str | None, WithJsonSchema({"type": "string", "enum": words(choices)})]


#: The credential scanner every caller-written text passes (registered by `sessions` in its
#: `AppConfig.ready()`: this module sits below it). Called with `{field name: value}`; raises
#: 422 `secret_in_transcript` with findings naming the field.
_text_scanner: Callable[[dict[str, Any]], None] | None = None


def register_text_scanner(scanner: Callable[[dict[str, Any]], None]) -> None:
    """Install the scanner `BodySchema` and `scan_caller_text` call (once, from `sessions`)."""
    global _text_scanner
    _text_scanner = scanner


def scan_caller_text(fields: dict[str, Any]) -> None:
    """Refuse (422 `secret_in_transcript`) when any text in `fields` (`{name: str | list | dict}`) carries a credential.

    The one check behind every text field a caller writes, on both APIs (Ninja `BodySchema`,
    DRF `identity.serializers._Strict`). Strings are scanned wherever they sit in lists and
    objects (keys included). Raises `RuntimeError` if no scanner was registered: a body must
    never pass unscanned because an app did not load.
    """
    if _text_scanner is None:
        raise RuntimeError("no credential scanner registered (sessions app not ready)")
    texts = {}
    for name, value in fields.items():
        found = _texts(value)
        if found:
            texts[name] = found[0] if len(found) == 1 and isinstance(value, str) else found
    if texts:
        _text_scanner(texts)


#: How deep a body field may nest before it is refused unread (400): the scanner and the routes
#: walk bodies, and a value nested past Python's stack would make them fail with a 500.
MAX_BODY_DEPTH = 100


def too_deep(name: str, value: Any, *, limit: int = MAX_BODY_DEPTH) -> str | None:
    """Return the path (`tools[0].function.parameters.…`) where `value` (field `name`) first nests deeper than `limit`, else None.

    Iterative: a value nested deeper than Python's stack is measured too. The path names the
    first six steps, then "…".
    """
    stack: list[tuple[Any, int, list[str]]] = [(value, 0, [name])]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, BaseModel):
            continue  # a nested body model was measured when it was validated
        if isinstance(item, dict):
            children = [(child, [*path, f".{key}"] if len(path) < 7 else path) for key, child in item.items()]
        elif isinstance(item, list | tuple):
            children = [(child, [*path, f"[{i}]"] if len(path) < 7 else path) for i, child in enumerate(item)]
        else:
            continue
        if depth + 1 > limit:
            return "".join(path) + ("…" if len(path) >= 7 else "")
        stack.extend((child, depth + 1, child_path) for child, child_path in children)
    return None


def _texts(value: Any) -> list[str]:
    """Return every non-empty string in `value` (dict keys included), iteratively: a body nested
    deeper than Python's stack is walked too. Nested body models are left out (each scans itself)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item:
                found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found[::-1]


class BodySchema(Schema):
    """Base of every request body of `/v1/agents` (and of each object nested in one).

    Two rules for every write (issue 29):

    * **Strict.** A field the schema does not declare is refused with 400 `invalid_request`
      naming it (`fields[].field` is its path, `message` "unknown field"), and the OpenAPI
      document declares `additionalProperties: false`.
    * **Scanned.** Every text the caller wrote — each string field, and each string inside a
      list or object field — passes the credential scanner (`scan_caller_text`) once the body
      is valid, before the route runs: a credential anywhere is 422 `secret_in_transcript` with
      findings naming the field, and nothing is stored. `unscanned` names fields whose value is
      not the caller's words (none so far); `scanned = False` exempts a body that carries what
      the platform *received* (a machine's report of model output, masked where it is stored).

    A new body schema gets both by subclassing this class instead of `ninja.Schema` (a subclass
    keeps them when it sets its own `model_config`: pydantic merges configs). A route reading
    its raw body itself calls `refuse_unknown_fields` and `scan_caller_text`.
    """

    model_config = ConfigDict(extra="forbid")

    unscanned: ClassVar[frozenset[str]] = frozenset()
    scanned: ClassVar[bool] = True
    #: `{field: (most items, the 400 message)}` for list fields, checked on the raw body before any
    #: item is validated: a body's work is bounded before it starts (20,000 chat messages took 35 s).
    max_items: ClassVar[dict[str, tuple[int, str]]] = {}

    @model_validator(mode="before")
    @classmethod
    def _bound_lists(cls, data: Any) -> Any:
        if cls.max_items and isinstance(data, dict):
            for name, (most, message) in cls.max_items.items():
                value = data.get(name)
                if isinstance(value, list) and len(value) > most:
                    raise InvalidRequest(message)
        return data

    @model_validator(mode="after")
    def _refuse_credentials(self):
        cls = type(self)
        for name in cls.model_fields:
            deep = too_deep(name, getattr(self, name))
            if deep is not None:
                raise InvalidRequest(f"{deep} nests deeper than {MAX_BODY_DEPTH} levels")
        if cls.scanned:
            scan_caller_text({name: getattr(self, name) for name in cls.model_fields if name not in cls.unscanned})
        return self


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

    `title` names it: `server.openapi.complete` publishes it as its own component
    (`#/components/schemas/<title>`), so a stream's frames are a schema of the document like any
    body, not prose.
    """
    return {"title": title, "description": description, "oneOf": frames}
