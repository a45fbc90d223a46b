"""Complete the OpenAPI document of `/v1/agents` with what every route shares.

Ninja documents what each route declares. Some answers come from the API as a whole, before or
around any route, and are declared here for every operation they apply to, so a new route
cannot forget them:

* 403 `forbidden` — every operation that needs a credential (no key, a bad key, no org);
* 400 `invalid_request` — every operation that takes a parameter or a body;
* 413 `payload_too_large` — every operation that takes a body (over 1 MiB, before parsing);
* 415 `unsupported_media_type` — every operation that takes a body (one that is not JSON);
* 422 `secret_in_transcript` — every operation that takes a body (a credential in any text the
  caller wrote: `agents_site.schemas.BodySchema`);
* 404 `not_found` — every operation with an id in its path (unknown, or another org's);
* 503 `store_busy` / `store_unavailable` — every operation that reads or writes the org's store.

405 is not an operation's answer: it is what a path answers to a method it does not serve
(with `Allow`). The security scheme is published as `bearerAuth` (the docs page's Authorize
button), and an agent's `name` is documented as refusing the API's own path words.
"""

from __future__ import annotations

import copy

from agents_site.schemas import ErrorOut
from agents.names import reserved_names

SCHEME = "bearerAuth"
_AUTH_CLASS = "OrgPrincipalAuth"
_ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}

COMMON = {
    400: "Invalid request: a parameter or the body failed validation (`invalid_request`, with `fields` when a field is named).",
    403: "No valid credential, no org, or the credential may not do this (`forbidden`).",
    404: "Not found: unknown, or another org's (the two are never told apart).",
    413: "The body is over 1 MiB (`payload_too_large`).",
    415: "The body is not JSON: send `Content-Type: application/json` (`unsupported_media_type`).",
    422: "A credential in a text you wrote (`secret_in_transcript`, masked `findings` naming the field); nothing was stored.",
    503: (
        "The org's store or a service this request needs is unavailable; nothing was half-written "
        "(`store_busy`: retry after `Retry-After` seconds; `store_unavailable`: its `condition` says why — "
        "`read_only`, `full`, or `restoring` while the org's store is restored from its backup, with `Retry-After`)."
    ),
}


def _normalise(operation: dict) -> dict:
    """Key the operation's responses by int (Ninja's keys) and merge entries a route declared
    under a string key (`openapi_extra`) into them."""
    merged: dict = {}
    for status, entry in operation.get("responses", {}).items():
        merged.setdefault(int(status), {}).update(entry)
    operation["responses"] = merged
    return merged


_SECRET_REF = {"$ref": "#/components/schemas/SecretErrorOut"}


def _answer(operation: dict, status: int, schema: dict = _ERROR_REF) -> None:
    entry = operation["responses"].setdefault(status, {})
    if entry.get("description") in (None, "", "Unknown Status Code"):
        entry["description"] = COMMON[status]
    entry.setdefault("content", {"application/json": {"schema": schema}})


def _declare_common(operation: dict) -> None:
    _normalise(operation)
    parameters = operation.get("parameters", [])
    has_body = "requestBody" in operation
    if operation.get("security"):
        _answer(operation, 403)
        _answer(operation, 503)
    if parameters or has_body:
        _answer(operation, 400)
    if has_body:
        _answer(operation, 413)
        _answer(operation, 415)
        if not operation.get("x-unscanned"):
            _answer(operation, 422, _SECRET_REF)
    if any(p.get("in") == "path" for p in parameters):
        _answer(operation, 404)


def _rename_scheme(document: dict) -> None:
    components = document.setdefault("components", {})
    schemes = components.get("securitySchemes", {})
    if _AUTH_CLASS in schemes:
        schemes[SCHEME] = schemes.pop(_AUTH_CLASS)
    for item in document.get("paths", {}).values():
        for operation in item.values():
            for requirement in operation.get("security", []):
                if _AUTH_CLASS in requirement:
                    requirement[SCHEME] = requirement.pop(_AUTH_CLASS)


def _refuse_reserved_names(document: dict) -> None:
    schema = document.get("components", {}).get("schemas", {}).get("AgentCreateIn")
    if schema is None:
        return
    name = schema.get("properties", {}).get("name")
    if name is not None:
        name["not"] = {"enum": sorted(reserved_names())}


def _hoist_streams(document: dict) -> None:
    """Publish every titled `text/event-stream` schema as its own component and refer to it."""
    schemas = document["components"]["schemas"]
    for item in document.get("paths", {}).values():
        for operation in item.values():
            for entry in operation.get("responses", {}).values():
                content = entry.get("content", {}).get("text/event-stream")
                schema = content.get("schema") if content else None
                if schema and "title" in schema:
                    schemas.setdefault(schema["title"], schema)
                    content["schema"] = {"$ref": f"#/components/schemas/{schema['title']}"}


def complete(document: dict) -> dict:
    """Return a copy of `document` (Ninja's OpenAPI dict) with the shared answers, the security
    scheme and the reserved agent names declared, and each event stream as its own component.

    A copy: Ninja builds its document around the routes' own `openapi_extra` dicts, so completing
    it in place changed them — the second document generated in a process had lost the stream
    components its `$ref`s name (`ChatStreamFrame`, `RunStreamFrame`).
    """
    document = copy.deepcopy(document)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorOut", ErrorOut.model_json_schema())
    _rename_scheme(document)
    for item in document.get("paths", {}).values():
        for operation in item.values():
            _declare_common(operation)
    _refuse_reserved_names(document)
    _hoist_streams(document)
    return document
