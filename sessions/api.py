"""Session and builds routes (spec 003: /v1/agents/sessions…, /v1/agents/builds…)."""

from ninja import Router

sessions_router = Router(tags=["sessions"])
builds_router = Router(tags=["builds"], auth=None)
