"""docs/reference/: the API reference pages are the served OpenAPI documents, rendered."""

from __future__ import annotations

import pytest

from scripts.docs import reference


@pytest.fixture
def served(client):
    return reference.pages(client)


@pytest.mark.parametrize("filename", sorted(reference.DOCUMENTS))
def test_the_committed_page_is_the_served_document_rendered(served, filename):
    path = reference.FOLDER / filename
    assert path.read_text(encoding="utf-8") == served[path], (
        f"docs/reference/{filename} differs from what the server serves: run python scripts/docs/generate.py reference")


def test_every_operation_and_schema_of_the_documents_is_on_its_page(client):
    for filename, (path, _) in reference.DOCUMENTS.items():
        document = client.get(path).json()
        text = (reference.FOLDER / filename).read_text(encoding="utf-8")
        for route, item in document["paths"].items():
            for method in reference.METHODS:
                if method in item:
                    assert f"#### `{method.upper()} {route}`" in text
        for name in document["components"]["schemas"]:
            assert f"### {name} {{#schema-{name.lower()}}}" in text


def test_a_changed_field_changes_the_page():
    document = {"info": {"title": "T", "version": "1"}, "paths": {"/v1/x": {"post": {
        "summary": "Make an x", "tags": ["x"], "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/XIn"}}}},
        "responses": {"201": {"description": "Created"}}}}},
        "components": {"schemas": {"XIn": {"type": "object", "required": ["name"], "additionalProperties": False,
                                           "properties": {"name": {"type": "string", "maxLength": 64, "description": "Its name."}}}}}}
    page = reference.render(document, path="/v1/x/openapi.json", title="X")
    assert "| `name` | string | yes | Its name. (≤ 64 characters) |" in page
    assert "Body (required, `application/json`): [`XIn`](#schema-xin)" in page
    document["components"]["schemas"]["XIn"]["properties"]["name"]["maxLength"] = 32
    assert "(≤ 32 characters)" in reference.render(document, path="/v1/x/openapi.json", title="X")
