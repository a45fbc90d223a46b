"""The client_action executor compares field names safely (issue 29 item 6), in Chromium: a reply field
outside `[a-z0-9_]` is refused and reported, and a look-alike of a forbidden name (Cyrillic е in
`agent_tokеn`, full-width letters) is refused as the forbidden name it reads as, after NFKC and
confusable folding — with the same table the server uses (`guide.field_names`)."""

from __future__ import annotations

import pytest

from guide import field_names
from identity.models import ClientAnomaly
from tests.chat.conftest import wait_until
from tests.console.test_browser_guided import RENDER, crafted_form, open_system_chat

pytestmark = pytest.mark.django_db(transaction=True)

CREATE = {"endpoint": "POST /v1/identity/agents", "auth": "user_jwt"}
UNSAFE = {  # a reply field → (what the anomaly says it reads as, the reason)
    "agent_tok\u0435n": ("agent_token", "the reply asks for a forbidden field"),  # Cyrillic е
    "ａｇｅｎｔ＿ｔｏｋｅｎ": ("agent_token", "the reply asks for a forbidden field"),  # full width
    "w\u0435bhook_secret": ("webhook_secret", "the reply asks for a forbidden field"),
    "Display_Name": ("display_name", "a field name must match [a-z0-9_]{1,64}"),
    "displ\u0430y_name": ("display_name", "a field name must match [a-z0-9_]{1,64}"),  # Cyrillic а: not forbidden, still refused
}


def test_unsafe_reply_field_names_are_refused_and_reported_as_anomalies(page, make_org, login, shoot):
    org = make_org("gf")
    login(page, org)
    open_system_chat(page)

    results = {name: page.evaluate(RENDER, crafted_form(CREATE, allowed=("agent_id", name))) for name in UNSAFE}
    safe = page.evaluate(RENDER, crafted_form(CREATE, allowed=("agent_id", "display_name")))

    assert results == {name: {"refused": "field_refused", "form": False} for name in UNSAFE}
    assert safe == {"refused": None, "form": True}
    shoot(page, "guided-field-names-refused")
    with org.context():
        wait_until(lambda: ClientAnomaly.objects.count() == len(UNSAFE), what="one anomaly per unsafe name")
        rows = {a.detail["field"]: a for a in ClientAnomaly.objects.all()}
    assert set(rows) == set(UNSAFE)
    for name, (reads_as, reason) in UNSAFE.items():
        detail = rows[name].detail
        assert (rows[name].kind, detail["reason"], detail["where"]) == ("field_refused", reason, "post_success_artifact.allowed_fields")
        assert detail.get("folded", name) == reads_as == field_names.fold(name)  # the browser folds as the server does

    # A plan built by hand never lets a look-alike through either, and folding agrees with the server's table.
    out = page.evaluate("""names => {
      const CA = window.ClientAction;
      const plan = {reply: {subtype: 'agent_created', allowed: ['agent_id'].concat(names), forbidden: []}};
      const source = {agent_id: 'ext_1'}; names.forEach(n => { source[n] = 'agt_x'; });
      return {reply: CA.reply(plan, [source]).artifact.payload, folded: names.map(CA.fold)};
    }""", list(UNSAFE))
    assert out == {"reply": {"agent_id": "ext_1"}, "folded": [field_names.fold(n) for n in UNSAFE]}
