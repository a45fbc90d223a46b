"""Write the documentation site's generated pages: `python scripts/docs/generate.py [--check] [PAGE …]`.

PAGE is any of `decisions`, `reference`, `environment`, `one-run`, `permissions` (default: all). Each page is
rendered from what the code serves or declares; `--check` writes nothing and exits 1 naming every
committed page that differs from a fresh rendering (`make docs-check`; the tests under
`tests/docs/` hold the same comparisons).

    decisions    docs/decisions/index.md       the decision records, by area
    reference    docs/reference/agents-api.md, docs/reference/identity-api.md
                                               the served OpenAPI documents of /v1/agents and /v1/identity
    environment  docs/operations/environment.md every environment variable, checked against the code
    one-run      docs/architecture/one-run.md  the modules one traced run visits
    permissions  docs/reference/permissions.md the permission table (agents_site/permissions.py)

The pages that need the site (reference, environment, one-run) run it in this process on a
throwaway data directory with the demo gateway in-process; nothing outside it is touched.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.docs import decisions  # noqa: E402

PAGES = ("decisions", "reference", "environment", "one-run", "permissions")
#: Variables that would point the throwaway site elsewhere (a developer's exports); cleared before it starts.
FOREIGN = ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL", "AGENTS_ORG_DATABASE",
           "AGENTS_GATEWAY_JWT_KEY", "CLOUD_AGENT_FEE_CENTS", "OTEL_EXPORTER_OTLP_ENDPOINT", "AGENTS_BACKUP_URL")


def setup_site() -> None:
    """Configure Django on a throwaway data directory with the embedded defaults and the demo gateway
    (`demo_gateway`, in this process on a free loopback port) as its inference gateway; once per process."""
    import os
    import tempfile

    import django
    from django.conf import settings

    from demo_gateway.server import DEMO_MODEL, Upstream

    if settings.configured:
        return
    for name in FOREIGN:
        os.environ.pop(name, None)
    gateway = Upstream(demo=True).start()
    os.environ.update(AGENTS_DATA_DIR=tempfile.mkdtemp(prefix="agents-docs-"), DJANGO_SETTINGS_MODULE="agents_site.settings",
                      INFERENCE_BASE_URL=gateway.base_url, AGENTS_DEFAULT_MODEL=DEMO_MODEL, AGENTS_LOG_LEVEL="ERROR")
    django.setup()


def rendered(page: str) -> dict[Path, str]:
    """Return {path: text} of the files `page` consists of, freshly rendered."""
    if page == "decisions":
        return {decisions.FOLDER / "index.md": decisions.index_page()}
    if page == "permissions":
        from scripts.docs import permission_table

        return {permission_table.PAGE: permission_table.page()}
    setup_site()
    if page == "reference":
        from scripts.docs import reference

        return reference.pages()
    if page == "environment":
        from scripts.docs import environment

        return {environment.PAGE: environment.page()}
    if page == "one-run":
        from scripts.docs import one_run

        return {one_run.PAGE: one_run.page()}
    raise SystemExit(f"unknown page {page!r} (one of {', '.join(PAGES)})")


def main(argv: list[str] | None = None) -> int:
    """Render the pages named in `argv`; write them, or with `--check` compare them. Return the exit code."""
    parser = argparse.ArgumentParser(prog="scripts/docs/generate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a committed page differs")
    parser.add_argument("pages", nargs="*", choices=[*PAGES, []], default=[], metavar="PAGE")
    args = parser.parse_args(argv)
    stale = []
    for page in args.pages or PAGES:
        for path, text in rendered(page).items():
            current = path.read_text(encoding="utf-8") if path.exists() else None
            if current == text:
                continue
            if args.check:
                stale.append(path.relative_to(ROOT))
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print("stale (run python scripts/docs/generate.py and commit):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
