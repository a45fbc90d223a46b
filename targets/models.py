"""Targets, claim keys and routed runs (each org's own store). Filled in by the targets capability."""
