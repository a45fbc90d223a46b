"""Artifact field names compared safely (issue 29 item 6): a name outside `[a-z0-9_]` is refused, and
the forbidden list is checked after NFKC and look-alike folding — in `guide.field_names` and where
the server validates an artifact (`parse_response`: an `artifact_response` sent to the system agent)."""

from __future__ import annotations

import pytest

from guide import field_names
from tests.chat.conftest import stored
from tests.guide.test_system_agent import no_inference, response_message, system  # noqa: F401  (fixture re-used)

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

CYRILLIC_E = "\u0435"
LOOK_ALIKES = {
    f"agent_tok{CYRILLIC_E}n": "agent_token",  # Cyrillic е
    "ａｇｅｎｔ＿ｔｏｋｅｎ": "agent_token",  # full width: NFKC
    "\u0440rivate_key": "private_key",  # Cyrillic р
    "webhook_s\u0435cr\u0435t": "webhook_secret",
    "AGENT_TOKEN": "agent_token",
    "\U0001d41d": "d",  # MATHEMATICAL BOLD SMALL D: NFKC → the JWK's private part
}


@pytest.mark.parametrize("name, reads_as", LOOK_ALIKES.items(), ids=[repr(n) for n in LOOK_ALIKES])
def test_a_look_alike_of_a_forbidden_name_reads_as_it(name, reads_as):
    assert field_names.fold(name) == reads_as
    assert field_names.forbidden(name) and field_names.refusal(name) == f"reads as the forbidden field {reads_as}"


@pytest.mark.parametrize("name", ["Display_Name", "agent-id", "agent id", "agent_id\u200b", "", "x" * 65, "d\u00e9j\u00e0", 7])
def test_a_name_outside_the_alphabet_is_refused(name):
    assert field_names.refusal(name) is not None
    assert not isinstance(name, str) or not field_names.FIELD_NAME.fullmatch(name)


def test_ordinary_names_pass_and_the_fold_table_maps_only_onto_the_alphabet():
    assert [field_names.refusal(n) for n in ("agent_id", "display_name", "emergency")] == [None, None, None]
    table = field_names.fold_table()
    assert len(table) > 1000 and table[CYRILLIC_E] == "e" and set(table.values()) <= set("abcdefghijklmnopqrstuvwxyz0123456789_")


@pytest.mark.parametrize("name, said", [
    (f"agent_tok{CYRILLIC_E}n", "must not carry agent_token: it is a forbidden field"),
    ("ａｇｅｎｔ＿ｔｏｋｅｎ", "must not carry agent_token: it is a forbidden field"),
    ("Display_Name", "field name Display_Name must match [a-z0-9_]{1,64}"),
    (f"displ\u0430y_name", "field name displ\\u0430y_name must match [a-z0-9_]{1,64}"),  # Cyrillic а, not forbidden
])
def test_an_artifact_response_with_an_unsafe_field_name_is_refused_and_nothing_stored(org_a, no_inference, name, said):  # noqa: F811
    response = system(org_a, response_message("agent_created", {"agent_id": "ext_1", name: "x"}))

    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["status"], body["code"]) == (400, "invalid_request") and said in body["error"]
    assert stored(org_a) == {"conversations": [], "messages": [], "runs": []}
