"""Generators of the documentation site's generated pages (`python scripts/docs/generate.py`).

Each module renders one kind of page from what the code serves or declares, so the page cannot
drift: `reference` (the API reference from the served OpenAPI documents), `environment` (every
environment variable), `decisions` (the index of the decision records), `one_run` (a traced run,
module by module). `generate.py --check` exits 1 naming every committed page that differs; the
tests under `tests/docs/` hold the same comparisons.
"""
