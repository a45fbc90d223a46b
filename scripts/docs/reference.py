"""The API reference pages: Markdown rendered from the OpenAPI documents the site serves.

`pages(client=None)` GETs `/v1/agents/openapi.json` and `/v1/identity/openapi.json` through
Django's test client (the documents the server answers, built by Ninja and drf-spectacular from
the routes) and renders each as one page: the operations by tag (method, path, summary,
description, parameters, body, answers) and every schema (fields, types, constraints, required).
Nothing is written by hand, so a route, a field or a status that changes changes the page, and
`tests/docs/test_reference.py` fails until the page is regenerated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "docs" / "reference"
DOCUMENTS = {
    "agents-api.md": ("/v1/agents/openapi.json", "The `/v1/agents` API"),
    "identity-api.md": ("/v1/identity/openapi.json", "The `/v1/identity` API"),
}
METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text: str) -> str:
    """Return `text` fit for one Markdown table cell (one line, pipes escaped)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _schema_link(name: str) -> str:
    return f"[`{name}`](#schema-{name.lower()})"


def type_of(schema: dict) -> str:
    """Return a short Markdown type of a JSON Schema: `string`, `integer ≥ 1`, [`AgentOut`](…), `array of …`, `… or null`."""
    if not schema:
        return "any"
    if "$ref" in schema:
        return _schema_link(_ref_name(schema["$ref"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            parts = [type_of(s) for s in schema[key]]
            nullable = "null" in parts
            parts = [p for p in parts if p != "null"]
            text = " or ".join(dict.fromkeys(parts))
            return text + (" or null" if nullable else "")
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return type_of(schema["allOf"][0])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return "one of " + ", ".join(f"`{v}`" if v is not None else "null" for v in schema["enum"])
    kind = schema.get("type", "object" if "properties" in schema else "any")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return "array of " + type_of(schema.get("items", {}))
    if kind == "object" and "properties" not in schema and isinstance(schema.get("additionalProperties"), dict):
        return "object of " + type_of(schema["additionalProperties"])
    text = kind
    if schema.get("format"):
        text += f" ({schema['format']})"
    if schema.get("nullable"):
        text += " or null"
    return text


def constraints(schema: dict) -> str:
    """Return the schema's limits in words (length, range, pattern, items, default), or ""."""
    words = []
    flat = schema
    for key in ("anyOf", "oneOf"):
        if key in schema:
            others = [s for s in schema[key] if s.get("type") != "null"]
            if len(others) == 1:
                flat = {**others[0], **{k: v for k, v in schema.items() if k != key}}
    for key, word in (("minLength", "≥ {} characters"), ("maxLength", "≤ {} characters"), ("minimum", "≥ {}"),
                      ("maximum", "≤ {}"), ("exclusiveMinimum", "> {}"), ("exclusiveMaximum", "< {}"),
                      ("minItems", "≥ {} items"), ("maxItems", "≤ {} items")):
        if key in flat:
            words.append(word.format(flat[key]))
    if "pattern" in flat:
        words.append(f"pattern `{flat['pattern']}`")
    if "not" in flat and "enum" in flat["not"]:
        words.append("not " + ", ".join(f"`{v}`" for v in flat["not"]["enum"]))
    if "default" in schema and schema["default"] is not None:
        words.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(words)


def _parameters(operation: dict) -> list[str]:
    params = operation.get("parameters") or []
    if not params:
        return []
    lines = ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
    for p in params:
        schema = p.get("schema", {})
        limits = constraints(schema)
        description = " ".join(x for x in (p.get("description", "") or schema.get("description", ""), limits and f"({limits})") if x)
        lines.append(f"| `{p['name']}` | {p['in']} | {_cell(type_of(schema))} | {'yes' if p.get('required') else 'no'} | {_cell(description)} |")
    return lines + [""]


def _body(operation: dict) -> list[str]:
    body = operation.get("requestBody")
    if not body:
        return []
    lines = []
    for media, content in body.get("content", {}).items():
        lines.append(f"Body ({'required' if body.get('required') else 'optional'}, `{media}`): {type_of(content.get('schema', {}))}")
    return lines + [""]


def _answers(operation: dict) -> list[str]:
    lines = ["| status | answer | body |", "|---|---|---|"]
    for status in sorted(operation.get("responses", {}), key=lambda s: (s == "default", s)):
        answer = operation["responses"][status]
        bodies = [f"{type_of(c.get('schema', {}))} (`{m}`)" if m != "application/json" else type_of(c.get("schema", {}))
                  for m, c in (answer.get("content") or {}).items()]
        lines.append(f"| {status} | {_cell(answer.get('description', ''))} | {_cell(', '.join(bodies))} |")
    return lines + [""]


def _schema_section(name: str, schema: dict) -> list[str]:
    lines = [f"### {name} {{#schema-{name.lower()}}}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    properties = schema.get("properties")
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, sub in properties.items():
            limits = constraints(sub)
            description = " ".join(x for x in (sub.get("description", ""), limits and f"({limits})") if x)
            lines.append(f"| `{field}` | {_cell(type_of(sub))} | {'yes' if field in required else 'no'} | {_cell(description)} |")
        extra = schema.get("additionalProperties")
        if extra is False:
            lines += ["", "Other fields are refused."]
        lines.append("")
    else:
        lines += [f"Type: {type_of(schema)}.", ""]
        limits = constraints(schema)
        if limits:
            lines += [f"Limits: {limits}.", ""]
    return lines


def render(document: dict, *, path: str, title: str) -> str:
    """Return the Markdown page of one OpenAPI `document` (as served at `path`)."""
    info = document.get("info", {})
    lines = [
        f"# {title}",
        "",
        f"<!-- Generated by scripts/docs/generate.py from {path} as the server answers it; do not edit. -->",
        "",
        f"{info.get('title', '')} {info.get('version', '')}: the document served at `{path}` (interactive at "
        f"`{path.rsplit('/', 1)[0]}/docs`).",
        "",
    ]
    if info.get("description"):
        lines += [info["description"].strip(), ""]
    schemes = document.get("components", {}).get("securitySchemes", {})
    if schemes:
        lines += ["Credentials:", ""]
        for name, scheme in schemes.items():
            words = scheme.get("description") or " ".join(str(scheme.get(k, "")) for k in ("type", "scheme", "in", "name")).strip()
            lines.append(f"- `{name}`: {' '.join(str(words).split())}")
        lines.append("")
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    for route, item in document.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                by_tag.setdefault((operation.get("tags") or ["other"])[0], []).append((method, route, operation))
    lines += ["## Operations", ""]
    for tag in sorted(by_tag):
        lines += [f"### {tag}", ""]
        for method, route, operation in sorted(by_tag[tag], key=lambda o: (o[1], METHODS.index(o[0]))):
            summary = operation.get("summary", "")
            lines += [f"#### `{method.upper()} {route}`", ""]
            if summary:
                lines += [f"**{summary.strip()}**", ""]
            description = (operation.get("description") or "").strip()
            if description and description != summary:
                lines += [description, ""]
            if operation.get("security") == [] or (not operation.get("security") and not document.get("security")):
                lines += ["No credential needed.", ""] if "security" in operation else []
            lines += _parameters(operation) + _body(operation) + _answers(operation)
    lines += ["## Schemas", ""]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += _schema_section(name, schema)
    text = "\n".join(lines).rstrip() + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def pages(client=None) -> dict[Path, str]:
    """Return {path: Markdown} of both reference pages, read through `client` (a Django test client; one is made when None)."""
    if client is None:
        from django.test import Client

        client = Client()
    out = {}
    for filename, (path, title) in DOCUMENTS.items():
        answer = client.get(path)
        if answer.status_code != 200:
            raise RuntimeError(f"{path} answered {answer.status_code}")
        out[FOLDER / filename] = render(answer.json(), path=path, title=title)
    return out
