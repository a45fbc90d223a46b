"""The composition root: what wires the apps into one server (issue 48 item 4).

`urls` and `api` (the URLconf and the one NinjaAPI), `asgi` (the ASGI application), `middleware`
and `inline_middleware` (the request chain), `openapi` (the document's finishing), `revocation_guard`,
`heap` (start-up's freeze) and the `qcluster` / `serve` commands. It sits above every app and nothing
imports it (`.importlinter`); the ground the apps share (vocabulary, errors, wire helpers) is `agents_site`.
"""
