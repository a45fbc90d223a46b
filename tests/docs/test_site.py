"""The documentation site builds with --strict, offline, from the theme's own files (no font, no CDN)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
import yaml

from scripts.docs import examples
from tests.support.live import ROOT

MKDOCS = ROOT / ".venv" / "bin" / "mkdocs"


class _Loader(yaml.SafeLoader):
    """mkdocs.yml as data (its `!!python/name:` tags, if any, read as plain strings)."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)


def config() -> dict:
    return yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)


def nav_pages(nav) -> list[str]:
    found = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_the_config_asks_for_nothing_from_the_network():
    site = config()
    assert site["theme"]["name"] == "material" and site["theme"]["font"] is False
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in site.get("plugins", [])]
    assert not {"privacy", "social", "material/privacy", "material/social"} & set(plugins)
    assert site["strict"] is True
    pins = (ROOT / "requirements-dev.txt").read_text(encoding="utf-8")
    assert re.search(r"^mkdocs==\d", pins, re.M) and re.search(r"^mkdocs-material==\d", pins, re.M)


def test_every_page_but_the_decision_records_is_in_the_nav():
    listed = set(nav_pages(config()["nav"]))
    pages = {str(p.relative_to(examples.DOCS)) for p in examples.pages()}
    assert sorted(listed - pages) == [], "the nav names a page that does not exist"
    orphans = sorted(p for p in pages - listed if not re.fullmatch(r"decisions/\d{4}-.+\.md", p))
    assert orphans == [], "a page nobody reaches: add it to mkdocs.yml's nav"


def remote_assets(site) -> list[str]:
    """Return every asset the built `site` would load from another host: scripts, images, frames,
    `<link>`s (stylesheets, fonts, preconnects, icons; not a canonical address) and CSS `url()`s."""
    remote = []
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        for tag in re.findall(r"<(?:script|img|iframe|source)\b[^>]*>", html):
            remote += [f"{page.name}: {url}" for url in re.findall(r"\bsrc=\"((?:https?:)?//[^\"]+)\"", tag)]
        for tag in re.findall(r"<link\b[^>]*>", html):
            if 'rel="canonical"' not in tag:
                remote += [f"{page.name}: {url}" for url in re.findall(r"\bhref=\"((?:https?:)?//[^\"]+)\"", tag)]
    for sheet in site.rglob("*.css"):
        remote += [f"{sheet.name}: {m}" for m in re.findall(r"url\((?:'|\")?((?:https?:)?//[^)'\"]+)", sheet.read_text(encoding="utf-8"))]
    return remote


def test_remote_fonts_scripts_and_stylesheets_are_found(tmp_path):
    (tmp_path / "a.html").write_text('<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin>'
                                     '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
                                     '<link rel="canonical" href="https://example.org/a.html">'
                                     '<script src="//cdn.example.com/x.js"></script><a href="https://example.org/">a link is fine</a>')
    (tmp_path / "b.css").write_text("@font-face{src:url(https://fonts.gstatic.com/r.woff2)}")
    assert len(remote_assets(tmp_path)) == 4


def _offline(command: list[str]) -> list[str]:
    """Return `command` in a network namespace of its own when this machine allows one (unshare -rn)."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        return [unshare, "-rn", *command]
    return command


def test_the_site_builds_strict_offline_and_loads_nothing_from_elsewhere(tmp_path):
    if not MKDOCS.exists():
        pytest.fail("mkdocs is not installed: .venv/bin/pip install -r requirements-dev.txt")
    site = tmp_path / "site"
    built = subprocess.run(_offline([str(MKDOCS), "build", "--strict", "--quiet", "--site-dir", str(site)]), cwd=ROOT,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout + built.stderr
    assert (site / "index.html").exists() and (site / "reference" / "agents-api.html").exists()
    remote = remote_assets(site)
    assert remote == []
    # The benchmarks page carries BENCHMARKS.md's table (a snippet, not a copy).
    assert "figure</th>" in (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
