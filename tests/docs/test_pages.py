"""The README is a door into the docs; the pages that state what the code does agree with it."""

from __future__ import annotations

import re

from scripts.docs import examples
from tests.support.live import ROOT

README = ROOT / "README.md"


def test_the_readme_is_a_door_of_at_most_400_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 400


def test_every_link_of_the_readme_reaches_a_file():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert links, "the README links into the docs"
    missing = [link for link in links if not link.startswith("http") and not (ROOT / link).exists()]
    assert missing == []
    assert any(link.startswith("docs/guides/") for link in links)


def test_the_readmes_examples_are_examples_the_docs_run():
    """The README's shell and Python blocks are copies of getting started's, which make test runs."""
    run = {b.code for b in examples.examples(examples.DOCS / "getting-started.md") if not b.illustrative}
    readme = [b for b in examples.blocks(README) if b.is_example]
    assert readme, "the README shows a first run by curl and by the openai SDK"
    assert [b.where for b in readme if b.code not in run] == []
    assert {b.lang for b in readme} >= {"sh", "python"}


def test_the_development_page_states_each_steps_limit_as_the_script_sets_it():
    script = (ROOT / "scripts" / "test-passes.sh").read_text(encoding="utf-8")
    limits = dict(re.findall(r"^step (\S+) (\d+) ", script, re.M))
    limits.update(re.findall(r"pytest_pass (\w+) (\d+) ", script))
    assert set(limits) == {"lint-imports", "sdk-typescript", "main", "stock", "postgres"}, limits
    page = (examples.DOCS / "operations" / "development.md").read_text(encoding="utf-8")
    for step, seconds in limits.items():
        assert re.search(rf"^\| `{re.escape(step)}` \|.*\| {seconds} s \|$", page, re.M), f"{step}: the script's limit is {seconds} s"


def test_benchmarks_opens_with_one_table_of_todays_figures():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    first_table = [line for line in text[text.index("\n|"):].split("\n\n")[0].strip().splitlines() if line.startswith("|")]
    assert first_table[0] == "| figure | value | goal | machine | date | command |"
    rows = first_table[2:]
    assert len(rows) >= 20
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert len(cells) == 6, row
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", cells[4]), row
        command = cells[5].strip("`")
        assert command.startswith((".venv/bin/python ", "make ")), row
        script = re.match(r"\.venv/bin/python (bench/\w+\.py)", command)
        if script:
            assert (ROOT / script.group(1)).exists(), row
    assert "## " not in text, "the dated passes live in docs/benchmarks/history.md"
    assert (examples.DOCS / "benchmarks" / "history.md").read_text(encoding="utf-8").count("\n## ") >= 15
