"""The identity API's OpenAPI document (drf-spectacular) and its docs page.

`/v1/identity/openapi.json` is generated from the DRF views; the SSE inbox stream (a plain
async Django view) is added by `add_stream_path`. `/v1/identity/docs` is drf-spectacular's
ReDoc page, served with the ReDoc bundle the project already ships (no CDN).
"""

from __future__ import annotations

from django.templatetags.static import static
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.renderers import OpenApiJsonRenderer
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView

ERROR_REF = {"$ref": "#/components/schemas/ErrorOut"}


def add_stream_path(result, generator, request, public):
    """drf-spectacular post-processing hook: document GET /v1/identity/inbox/stream."""
    result.setdefault("paths", {})["/v1/identity/inbox/stream"] = {
        "get": {
            "operationId": "identity_inbox_stream",
            "summary": "Your inbox as Server-Sent Events (resumable by Last-Event-ID)",
            "tags": ["identity"],
            "parameters": [
                {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
                {"name": "lastEventId", "in": "query", "required": False, "schema": {"type": "string"}},
            ],
            "responses": {
                "200": {"description": "text/event-stream of `event: inbox` frames", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
                "400": {"description": "bad Last-Event-ID", "content": {"application/json": {"schema": ERROR_REF}}},
                "403": {"description": "no principal", "content": {"application/json": {"schema": ERROR_REF}}},
                "405": {"description": "method not allowed", "content": {"application/json": {"schema": ERROR_REF}}},
            },
        }
    }
    return result


def strict_request_bodies(result, generator, request, public):
    """drf-spectacular post-processing hook: declare what `identity.serializers._Strict` enforces.

    Every request body component (`…Request`, the split request half) gets
    `additionalProperties: false` (an unknown field is a 400 naming it), and every operation
    with a body answers 415 `unsupported_media_type` for a body that is not JSON and 422
    `secret_in_transcript` for a credential in a text field (`_Strict.validate`; the key,
    envelope and backup bodies scan nothing, so they never answer it — declared anyway).
    """
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and schema.get("type") == "object":
            schema["additionalProperties"] = False
    for item in result.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                responses = operation.setdefault("responses", {})
                responses.setdefault("415", {"description": "The body is not JSON (`unsupported_media_type`).", "content": {"application/json": {"schema": ERROR_REF}}})
                responses.setdefault("422", {"description": "A credential in a text you wrote (`secret_in_transcript`, masked `findings`); nothing stored.",
                                             "content": {"application/json": {"schema": ERROR_REF}}})
    return result


class UserPrincipalScheme(OpenApiAuthenticationExtension):
    """The user principal in the document: an API key or gateway JWT as a bearer (or a console session)."""

    target_class = "identity.authentication.UserPrincipalAuthentication"
    name = "userPrincipal"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "API key `ak_…`, gateway JWT, or console session login"}


class AgentTokenScheme(OpenApiAuthenticationExtension):
    """The agent token in the document (`Authorization: Bearer agt_…`)."""

    target_class = "identity.authentication.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "agt_<org>_<id>_<secret>", "description": "the identity agent's token"}


class IdentitySchemaView(SpectacularAPIView):
    """GET /v1/identity/openapi.json (public, like /v1/agents/openapi.json), always JSON."""

    authentication_classes: list = []
    permission_classes: list = []
    renderer_classes = [OpenApiJsonRenderer]


class IdentityDocsView(SpectacularRedocView):
    """GET /v1/identity/docs: ReDoc over the document, from the locally shipped bundle."""

    authentication_classes: list = []
    permission_classes: list = []
    url_name = "identity-openapi"

    @staticmethod
    def _redoc_standalone():
        return static("ninja/redoc.standalone.js")
