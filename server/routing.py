"""An included URL map that tries only the routes whose literal beginning fits the path (issue 59 item 4).

Django's `URLResolver.resolve` tries every route of an include in order, recording each miss
(`_extend_tried`), until one matches: `GET /v1/agents` walked the 70 routes of the Ninja API
before its own, ~5 % of an authenticated GET's CPU. A route can only match a path that begins
with the route's text before its first converter (`agents/sessions/<id>/tree` needs
`agents/sessions/`), so `IndexedResolver` skips the routes whose literal beginning the path
lacks and tries the rest in their order: the route that answers, its arguments, names and
namespaces are exactly Django's, and `reverse()` reads the same routes.

What differs: the `tried` lists (a match's `ResolverMatch.tried`, a miss's `Resolver404`) name
only the routes tried. They feed nothing but Django's debug 404 page; with `DEBUG` on, a miss
walks every route again so that page stays complete.
"""

from __future__ import annotations

from django.conf import settings
from django.urls import URLPattern, URLResolver
from django.urls.exceptions import Resolver404
from django.urls.resolvers import ResolverMatch, RoutePattern
from django.utils.functional import cached_property


def _literal_beginning(pattern) -> str:
    """Return the text every path matched by `pattern` begins with ("" for a regex route).

    Example: `path("agents/sessions/<id>/tree", …)` → `"agents/sessions/"`; `re_path(r"^x", …)` → `""`.
    """
    if isinstance(pattern.pattern, RoutePattern):
        return str(pattern.pattern).split("<", 1)[0]
    return ""


class IndexedResolver(URLResolver):
    """A `URLResolver` whose `resolve` skips routes the path cannot match (see module doc)."""

    @cached_property
    def _routes(self) -> list[tuple[str, object]]:
        return [(_literal_beginning(pattern), pattern) for pattern in self.url_patterns]

    def resolve(self, path):
        """Return the `ResolverMatch` Django's own resolver returns for `path`; raise `Resolver404` on none.

        The loop body is Django 5.2's `URLResolver.resolve`, with the skip added.
        """
        path = str(path)
        match = self.pattern.match(path)
        if not match:
            raise Resolver404({"path": path})
        new_path, args, kwargs = match
        tried = []
        for beginning, pattern in self._routes:
            if not new_path.startswith(beginning):
                continue
            try:
                sub_match = pattern.resolve(new_path)
            except Resolver404 as exc:
                self._extend_tried(tried, pattern, exc.args[0].get("tried"))
                continue
            if not sub_match:
                tried.append([pattern])
                continue
            sub_match_dict = {**kwargs, **self.default_kwargs}
            sub_match_dict.update(sub_match.kwargs)
            sub_match_args = sub_match.args if sub_match_dict else args + sub_match.args
            current_route = "" if isinstance(pattern, URLPattern) else str(pattern.pattern)
            self._extend_tried(tried, pattern, sub_match.tried)
            return ResolverMatch(
                sub_match.func,
                sub_match_args,
                sub_match_dict,
                sub_match.url_name,
                [self.app_name] + sub_match.app_names,
                [self.namespace] + sub_match.namespaces,
                self._join_route(current_route, sub_match.route),
                tried,
                captured_kwargs=sub_match.captured_kwargs,
                extra_kwargs={**self.default_kwargs, **sub_match.extra_kwargs},
            )
        if settings.DEBUG:  # the debug 404 page lists every route
            return super().resolve(path)
        raise Resolver404({"tried": tried, "path": new_path})


def indexed(route: str, included: tuple) -> IndexedResolver:
    """Return `path(route, included)` as an `IndexedResolver`; `included` is what `include()` or a Ninja API's `urls` gives."""
    urlconf_module, app_name, namespace = included
    return IndexedResolver(RoutePattern(route, is_endpoint=False), urlconf_module, None, app_name=app_name, namespace=namespace)
