"""The shared core and the runner stay apart from the server: no Django, no server app (issue 27)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = {"agents", "runs", "agents_site", "server", "tenancy", "billing", "sessions", "targets", "coding", "chat", "openai_api", "console",
          "identity", "guide", "django", "ninja", "rest_framework", "channels", "django_q"}


def imported_roots(path: Path) -> set[str]:
    """Return the top-level packages `path` imports anywhere (functions included)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package, forbidden", [("toolkit", SERVER | {"runner"}), ("runner", SERVER)])
def test_the_package_imports_nothing_of_the_server(package, forbidden):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    offenders = {str(f.relative_to(ROOT)): sorted(imported_roots(f) & forbidden) for f in files}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_runner_keeps_only_its_own_parts():
    """The coding tools, the sandbox and the built-in tools live in toolkit, not in a copy."""
    names = sorted(p.name for p in (ROOT / "runner").glob("*.py"))
    # `verify` is the one-file verifier toolkit/verify_build.py, which the runner's CLI runs (issue 57).
    assert names == ["__init__.py", "__main__.py", "cli.py", "client.py", "coding.py", "daemon.py", "execute.py", "gitinfo.py",
                     "keyfile.py", "machine.py"]


def test_the_one_file_verifier_imports_only_the_standard_library():
    """toolkit/verify_build.py is downloaded and run alone (issue 57): nothing of the project, no package."""
    import sys

    roots = imported_roots(ROOT / "toolkit" / "verify_build.py")
    assert roots - set(sys.stdlib_module_names) == set(), roots
