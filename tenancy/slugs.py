"""The rule for an org slug: the one check every path, alias and database name is built after."""

from __future__ import annotations

import re

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")


class InvalidOrg(ValueError):
    """The org slug does not match `^[a-z0-9][a-z0-9-]{0,62}$`; no path was built."""


def validate_slug(slug: object) -> str:
    """Return `slug` if it is a valid org slug, else raise `InvalidOrg`.

    Valid: `^[a-z0-9][a-z0-9-]{0,62}$` (so `../x`, `A`, `""` and 4096 characters are refused).
    """
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
        raise InvalidOrg("invalid org")
    return slug
