"""Run-target routes (spec 003: /v1/agents/targets…)."""

from ninja import Router

router = Router(tags=["targets"])
