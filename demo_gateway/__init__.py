"""The loopback OpenAI-compatible gateway: the tests' scripted upstream and `make demo`'s stand-in model.

Django-free and standalone: it imports nothing of the project (an import-linter contract says so),
and nothing of the server imports it. See `demo_gateway.server`.
"""
