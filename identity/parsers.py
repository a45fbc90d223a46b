"""The identity API's body parser: one JSON object of storable UTF-8 text, or a 400.

DRF's own `JSONParser` lets a body nested ~1,000 deep raise `RecursionError` (a 500) and hands
a lone `\\ud800` escape to the serializers, whose error message echoed it back (a 500 again: the
renderer cannot encode it). This parser refuses both before any serializer runs, exactly as the
`/v1/agents` parser does (`server.api.JsonObjectParser`), with one wording for both APIs.
"""

from __future__ import annotations

from rest_framework.parsers import JSONParser

from agents_site.wire import json_object_body


class IdentityJSONParser(JSONParser):
    """Parse `application/json` into a dict; raise `InvalidRequest` (400, error shape) otherwise.

    Refused: bytes that are not UTF-8, text that is not JSON or nests too deep for Python's
    parser, a value that is not an object, and any string (key or value) holding an unpaired
    UTF-16 surrogate or a NUL. An empty body is an empty object (routes without fields).
    """

    def parse(self, stream, media_type=None, parser_context=None) -> dict:
        """Return the body as a dict; raise `InvalidRequest` naming what is wrong."""
        raw = stream.read() if stream is not None else b""
        if not raw.strip():
            return {}
        return json_object_body(raw)
