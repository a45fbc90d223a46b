"""Benchmark: URL resolution with the indexed includes (server/routing.py) against Django's own resolver (issue 59).

In one process, no server: the site's URL map as served (`get_resolver()`, whose API includes
are `IndexedResolver`s) and the same map rebuilt with Django's `URLResolver` throughout (the
map before issue 59). `--pairs` interleaved pairs (the order flips each pair), each timing
`--n` resolutions of every path below on both; printed per path: microseconds per resolution,
median of the pairs, and indexed ÷ Django's with its range. The load average is printed beside.

    .venv/bin/python bench/routes.py [--n 2000] [--pairs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PATHS = ("/v1/agents", "/v1/agents/writer/run", "/v1/agents/sessions/sess_1/events", "/v1/agents/targets/t1/claim",
         "/v1/agents/openai/v1/chat/completions", "/v1/agents/mcp", "/console/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("AGENTS_DATA_DIR", tempfile.mkdtemp(prefix="agents-bench-routes-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"
    import django

    django.setup()
    from django.urls import URLResolver, get_resolver
    from django.urls.resolvers import RegexPattern

    def plain(resolver):
        patterns = [plain(p) if isinstance(p, URLResolver) else p for p in resolver.url_patterns]
        return URLResolver(resolver.pattern, patterns, resolver.default_kwargs, app_name=resolver.app_name, namespace=resolver.namespace)

    indexed = get_resolver()
    django_own = URLResolver(RegexPattern(r"^/"), [plain(p) if isinstance(p, URLResolver) else p for p in indexed.url_patterns])
    for path in PATHS:  # both answer alike, and both are warm
        assert indexed.resolve(path).func is django_own.resolve(path).func

    def per_call(resolver, path: str) -> float:
        start = time.perf_counter()
        for _ in range(args.n):
            resolver.resolve(path)
        return (time.perf_counter() - start) / args.n * 1e6

    load_before = os.getloadavg()[0]
    rows = {path: ([], []) for path in PATHS}
    for pair in range(args.pairs):
        for path in PATHS:
            order = ((0, django_own), (1, indexed)) if pair % 2 == 0 else ((1, indexed), (0, django_own))
            for slot, resolver in order:
                rows[path][slot].append(per_call(resolver, path))
    print(f"routes.py: {args.n} resolutions a path per side, {args.pairs} interleaved pairs, load average "
          f"{load_before:.1f} → {os.getloadavg()[0]:.1f}")
    print(f"{'path':<42}{'Django µs':>11}{'indexed µs':>12}{'indexed ÷ Django':>18}")
    for path, (before, after) in rows.items():
        ratios = [a / b for a, b in zip(after, before)]
        print(f"{path:<42}{statistics.median(before):>11.1f}{statistics.median(after):>12.1f}"
              f"{statistics.median(ratios):>10.2f} ({min(ratios):.2f}–{max(ratios):.2f})")


if __name__ == "__main__":
    main()
