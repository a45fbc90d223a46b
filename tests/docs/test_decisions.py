"""The decision records (docs/decisions/): one form, resolvable links, an index that lists them all."""

from __future__ import annotations

from scripts.docs import decisions


def test_every_record_has_context_decision_consequences_and_status():
    assert decisions.problems() == []


def test_a_superseded_record_links_a_record_that_is_not_itself_superseded_by_it():
    by_name = {r.path.name: r for r in decisions.records()}
    superseded = [r for r in by_name.values() if r.superseded_by]
    assert superseded, "the log had superseded entries; their records must say so"
    for record in superseded:
        successor = by_name[record.superseded_by]
        assert successor.superseded_by != record.path.name, f"{record.path.name} and its successor supersede each other"


def test_the_index_lists_every_record_as_the_generator_writes_it():
    assert (decisions.FOLDER / "index.md").read_text(encoding="utf-8") == decisions.index_page(), (
        "docs/decisions/index.md is stale: run python scripts/docs/generate.py decisions")


def test_the_checks_catch_a_record_without_its_sections(tmp_path):
    (tmp_path / "0001-good.md").write_text("# 0001. Good\n\nArea: Runs\n\n## Context\n\nc\n\n## Decision\n\nd\n\n"
                                            "## Consequences\n\nq\n\n## Status\n\nSuperseded by [0002](0002-gone.md).\n")
    (tmp_path / "0003-Bad_Name.md").write_text("# 0003. Bad\n\nArea: Runs\n\n## Context\n\nc\n\n## Status\n\nAccepted.\n")
    found = decisions.problems(tmp_path)
    assert "0001-good.md: links 0002-gone.md, which does not exist" in found
    assert any(p.startswith("0003-Bad_Name.md: the file name") for p in found)
    assert any(p.startswith("0003-Bad_Name.md: sections are ['Context', 'Status']") for p in found)
