"""The tests' loopback OpenAI-compatible upstream: `demo_gateway.server`, the one copy `make demo` serves too."""

from demo_gateway.server import HOLD_SECONDS, STRICT_FIELDS, Reply, Streamed, Upstream, demo_reply, strict_errors  # noqa: F401
