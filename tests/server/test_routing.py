"""The indexed includes (server/routing.py) answer every path exactly as Django's own resolver does."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.exceptions import Resolver404
from django.urls.resolvers import RegexPattern

from server.routing import IndexedResolver

# Values tried for a converter, the first its regex admits is used.
SAMPLES = ("x9", "123", "run_" + "9" * 32, "sess_" + "9" * 32, "a/b", "9")
EXTRA_PATHS = ("/v1/agents", "/v1/agents/", "/v1/agents/zz/yy/xx/ww", "/v1/agents/openai/v1/nothing", "/v1/nothing",
               "/nothing/at/all", "/v1/agents/mcp", "/v1/agents/mcp/", "/v1/agents/a2a/public/acme", "/")


def _plain(resolver: URLResolver) -> URLResolver:
    """Return `resolver` rebuilt as Django's own class, its includes too."""
    patterns = [_plain(p) if isinstance(p, URLResolver) else p for p in resolver.url_patterns]
    return URLResolver(resolver.pattern, patterns, resolver.default_kwargs, app_name=resolver.app_name,
                       namespace=resolver.namespace)


def _paths(patterns, prefix: str = "/"):
    for pattern in patterns:
        route = pattern.pattern
        text = str(route)
        for name, converter in getattr(route, "converters", {}).items():
            value = next((s for s in SAMPLES if re.fullmatch(converter.regex, s)), "x9")
            text = re.sub(r"<(?:[^>:]+:)?" + re.escape(name) + ">", value, text)
        if isinstance(pattern, URLResolver):
            yield from _paths(pattern.url_patterns, prefix + text)
        else:
            yield prefix + text.lstrip("^").rstrip("$")


def _outcome(resolver, path):
    try:
        match = resolver.resolve(path)
    except Resolver404:
        return "404"
    return (match.func, match.args, match.kwargs, match.url_name, match.route, match.app_names, match.namespaces,
            match.captured_kwargs, match.extra_kwargs)


def test_the_api_includes_are_indexed():
    indexed = [str(p.pattern) for p in get_resolver().url_patterns if isinstance(p, IndexedResolver)]
    assert indexed == ["v1/agents/openai/v1/", "v1/agents/openai/v1/", "v1/agents/", "v1/agents/", "v1/"]


def test_every_route_resolves_as_with_djangos_own_resolver():
    root = get_resolver()
    plain = URLResolver(RegexPattern(r"^/"), [_plain(p) if isinstance(p, URLResolver) else p for p in root.url_patterns])
    paths = sorted(set(_paths(root.url_patterns)) | set(EXTRA_PATHS))
    assert len(paths) > 80
    outcomes = {path: _outcome(root, path) for path in paths}
    assert outcomes == {path: _outcome(plain, path) for path in paths}
    assert sum(outcome != "404" for outcome in outcomes.values()) > 0.8 * len(paths)  # the samples reach their routes


@pytest.mark.parametrize("debug", [False, True])
def test_a_miss_is_a_404_listing_the_routes_tried(settings, debug):
    settings.DEBUG = debug
    with pytest.raises(Resolver404) as refused:
        get_resolver().resolve("/v1/agents/zz/yy/xx/ww")
    tried = refused.value.args[0]["tried"]
    assert tried and all(isinstance(step[-1], (URLPattern, URLResolver)) for step in tried)
    if debug:  # the debug 404 page lists every route of the API
        assert sum(len(step) > 1 and str(step[0].pattern) == "v1/" for step in tried) > 60
