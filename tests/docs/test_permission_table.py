"""docs/reference/permissions.md is the permission table of the code, rendered (issue 50 item 1)."""

from __future__ import annotations

from scripts.docs import permission_table


def test_the_committed_page_is_the_generated_one():
    assert permission_table.PAGE.read_text(encoding="utf-8") == permission_table.page(), (
        "docs/reference/permissions.md is stale: run python scripts/docs/generate.py permissions")


def test_the_page_names_every_row():
    from agents_site import permissions

    text = permission_table.page()
    for row in permissions.TABLE:
        assert f"`{' '.join(row.methods)} {row.path}`" in text
