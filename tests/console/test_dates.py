"""One date/time format in the console (issue 34): every date is a `<time data-local>` from the
`when` tag, which console.js writes in the viewer's local time with the ISO timestamp as tooltip."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from django.template import Context, Template

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def render(text: str, **context) -> str:
    return Template("{% load console_tags %}" + text).render(Context(context))


def test_when_renders_a_time_element_with_the_utc_iso_timestamp():
    at = datetime(2026, 12, 2, 13, 4, 24, 123456, tzinfo=timezone(timedelta(hours=9)))
    assert render("{% when at %}", at=at) == (
        '<time datetime="2026-12-02T04:04:24Z" title="2026-12-02T04:04:24Z" data-local>2026-12-02 04:04 UTC</time>')


def test_when_reads_the_apis_iso_strings_and_says_empty_for_none():
    assert 'datetime="2026-12-02T04:03:52Z"' in render("{% when at %}", at="2026-12-02T04:03:52Z")
    assert 'datetime="2026-12-02T04:03:52Z"' in render("{% when at %}", at="2026-12-02T04:03:52.5+00:00")
    assert render("{% when at %}", at=None) == "—"
    assert render('{% when at "never" %}', at="") == "never"
    assert render("{% when at %}", at="not a date") == "—"
    assert render("{% when at %}", at=datetime(2026, 1, 1, tzinfo=UTC)).count("<time") == 1


def test_no_console_template_formats_a_date_of_its_own():
    offenders = []
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        for pattern in (r"\|date:", r"\{\{\s*[\w.]+(?:_at|At|\.at)\s*(?:\|[^}]*)?\}\}"):
            offenders += [f"{path.relative_to(TEMPLATES)}: {m.group(0)}" for m in re.finditer(pattern, text)]
    assert offenders == []
