"""Field names of artifacts, compared safely (spec 001 client_action security model; issue 29 item 6).

A field name an artifact names (`allowed_fields`, an `artifact_response` payload key) must be
`[a-z0-9_]{1,64}`; anything else is refused. Whether a name is forbidden (`agent_token`,
`private_key`, `webhook_secret`, or any name reading as a token, secret, password or private key)
is decided on its folded form: Unicode NFKC, then every character Unicode's confusables data
(TR39, as the `confusable-homoglyphs` package ships it) lists as a look-alike of one of
`[a-z0-9_]` replaced by it, then lower case. So `agent_tokеn` (Cyrillic е), `ａｇｅｎｔ＿ｔｏｋｅｎ`
(full width) and `AGENT_TOKEN` all read as `agent_token`.

The console's executor (static/console/client_action.js) applies the same rule with the same
table (`fold_table()`, handed to the page with `json_script`); the server applies it where it
validates an artifact (`guide.system_agent.parse_response`).
"""

from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache

FIELD_NAME = re.compile(r"[a-z0-9_]{1,64}")
FIELD_NAME_RULE = "[a-z0-9_]{1,64}"
# Never sent back to the system agent, whatever a form says (the client's own list, spec 001).
FORBIDDEN = ("agent_token", "token", "private_key", "private_keys", "x25519_private_key", "ed25519_private_key",
             "signing_private_key", "webhook_secret", "secret", "jwk", "d")
SECRET_NAME = re.compile(r"token|secret|private|password|jwk")
_TARGETS = frozenset(string.ascii_lowercase + string.digits + "_")


@lru_cache(maxsize=1)
def fold_table() -> dict[str, str]:
    """Return `{character: one of [a-z0-9_]}` for every single character Unicode's confusables data
    calls a look-alike of a lower-case letter, digit or underscore (upper-case Latin letters are
    left to lower-casing). ~1,300 entries, e.g. `"е"` (U+0435) → `"e"`."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[str, str] = {}
    for character, glyphs in sorted(confusables_data.items()):
        if len(character) != 1 or character in _TARGETS or character in string.ascii_uppercase:
            continue
        targets = [g["c"].lower() for g in glyphs if len(g["c"]) == 1 and g["c"].lower() in _TARGETS]
        if targets:
            table[character] = sorted(targets)[0]
    return table


def fold(name: str) -> str:
    """Return `name` as it reads: NFKC, look-alikes of `[a-z0-9_]` replaced, lower case.

    `fold("agent_tok\\u0435n")` → `"agent_token"`; `fold("Display_Name")` → `"display_name"`.
    """
    table = fold_table()
    return "".join(table.get(c, c) for c in unicodedata.normalize("NFKC", name)).lower()


def forbidden(name: str, extra: tuple[str, ...] | list[str] = ()) -> bool:
    """Return True when `name`, folded, is on the forbidden list (or `extra`, folded) or reads as a secret."""
    folded = fold(name)
    return folded in FORBIDDEN or folded in {fold(e) for e in extra if isinstance(e, str)} or bool(SECRET_NAME.search(folded))


def refusal(name, extra: tuple[str, ...] | list[str] = ()) -> str | None:
    """Return why field name `name` is refused, or None when it may be used.

    Forbidden (after folding) first, so a look-alike of `agent_token` is named as what it reads as;
    then the character rule. Example: `refusal("agent_tok\\u0435n")` →
    `"reads as the forbidden field agent_token"`; `refusal("Display")` → `"must match [a-z0-9_]{1,64}"`.
    """
    if not isinstance(name, str):
        return f"must be a string matching {FIELD_NAME_RULE}"
    if forbidden(name, extra):
        return f"reads as the forbidden field {fold(name)[:64]}"
    if not FIELD_NAME.fullmatch(name):
        return f"must match {FIELD_NAME_RULE}"
    return None
