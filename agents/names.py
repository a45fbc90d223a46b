"""Agent names the API could not reach by name: its own path words.

`GET /v1/agents/{ref}` finds an agent by id or name, but a fixed word after `/v1/agents/`
belongs to another route: an agent named `sessions` or `metrics` would be created and then be
unreachable (or reached as something else). The words are read from the URL patterns that
are actually served, at run time, so a new route reserves its word without anyone listing it.
"""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver

API_PREFIX = "v1/agents/"

# Routes announced (spec 000: chat, coding, the OpenAI-compatible endpoint, repositories) but not
# built yet: their words are reserved now so no agent takes a name its route will shadow. Once a
# route exists its word comes from the URL patterns and its entry here can go.
ANNOUNCED = frozenset({"chat", "coding", "openai", "repos"})


def _routes(patterns, prefix: str = ""):
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield route


def path_words(urlconf: str | None = None) -> frozenset[str]:
    """Return the literal first segments served after `/v1/agents/` (e.g. `runs`, `sessions`,
    `docs`, `openapi.json`), read from the URLconf now in force."""
    found = set()
    for route in _routes(get_resolver(urlconf).url_patterns):
        route = route.lstrip("^")
        if not route.startswith(API_PREFIX):
            continue
        segment = route[len(API_PREFIX) :].split("/", 1)[0].rstrip("$")
        if segment and "<" not in segment and "(" not in segment:
            found.add(segment)
    return frozenset(found)


def reserved_names() -> frozenset[str]:
    """Return every agent name refused because the API uses the word as a path."""
    return path_words() | ANNOUNCED
