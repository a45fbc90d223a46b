"""The OpenAI-compatible endpoint: every agent of an org as a model (spec 000; issue 12 item 4)."""
