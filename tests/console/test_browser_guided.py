"""Guided creation (spec 001 steps 1–9) in Chromium against a live daphne: the system agent's forms
in the console chat, the client_action executor attacked with crafted forms, keys made in the
browser and registered, secrets shown once, the keystore, and the Passkey (PRF) backup."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from chat.models import Message
from identity.models import AgentKeySet, ClientAnomaly, IdentityProfile, KeyBackup
from tests.chat.conftest import wait_until
from tests.support.waiting import page_until

pytestmark = pytest.mark.django_db(transaction=True)

KEYSTORE_PASSWORD = "correct horse battery"


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def public_of(jwk: dict) -> str:
    """Return the base64 raw public key of an OKP private JWK (X25519 or Ed25519), derived here."""
    d = unb64url(jwk["d"])
    key = X25519PrivateKey.from_private_bytes(d) if jwk["crv"] == "X25519" else Ed25519PrivateKey.from_private_bytes(d)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def open_system_chat(page):
    page.goto("/console/chat/?with=preset:system")
    page.wait_for_function("document.querySelector('#chat-with') && document.querySelector('#chat-with').value === 'preset:system'")


def say(page, text: str):
    page.fill("#chat-input", text)
    page.click("#chat-send")


def assistant_said(page, start: str):
    """Wait for an assistant bubble starting with `start`; on a timeout, fail with what the page
    shows instead (its error box, its state line, the last messages) — a refused round says why."""
    try:
        page.wait_for_function(
            "start => Array.from(document.querySelectorAll('#chat-messages li.assistant .bubble')).some(b => b.textContent.startsWith(start))", arg=start)
    except PlaywrightTimeoutError:
        shown = page.evaluate("""() => ({error: document.getElementById('chat-error') && document.getElementById('chat-error').innerText,
            state: document.getElementById('chat-state') && document.getElementById('chat-state').innerText,
            messages: Array.from(document.querySelectorAll('#chat-messages li')).slice(-6).map(li => li.dataset.role + ': ' + li.innerText.slice(0, 200))})""")
        raise AssertionError(f"the assistant never said {start!r}; the page shows {shown}") from None


def creation_form(page, org, login) -> str:
    """Sign `org`'s user in, ask the system agent for /create-agent; return the form's selector once drawn."""
    login(page, org)
    open_system_chat(page)
    say(page, "/create-agent")
    form = "[data-artifact=agent_creation_form] form"
    page.wait_for_selector(form)
    return form


def test_the_whole_create_flow_from_the_console_chat(page, make_org, login, shoot):
    org = make_org("gc")
    form = creation_form(page, org, login)

    # Step 2: the schema is checked here, reserved prefixes included; nothing is sent.
    page.fill(f"{form} input[name=display_name]", "W")
    page.fill(f"{form} input[name=custom_id]", "system_weather")
    page.click(f"{form} button[type=submit]")
    assert page.inner_text(f"{form} [data-field=display_name] .field-error") == "at least 2 characters"
    assert page.inner_text(f"{form} [data-field=custom_id] .field-error") == "must not start with the reserved prefix 'system'"
    assert page.inner_text(f"{form} [data-field=connection_mode] .field-error") == "required"
    page.fill(f"{form} input[name=custom_id]", "Bad-Id")
    page.click(f"{form} button[type=submit]")
    assert page.inner_text(f"{form} [data-field=custom_id] .field-error") == "must match ^[a-z0-9_]{4,30}$"
    page.select_option(f"{form} select[name=connection_mode]", "webhook")
    page.click(f"{form} button[type=submit]")
    assert page.inner_text(f"{form} [data-field=webhook_url] .field-error") == "required"
    with org.context():
        assert not IdentityProfile.objects.exists()

    # Steps 3–6: create with the user's session, keys made here, registered with the agent's token, shown once.
    page.fill(f"{form} input[name=display_name]", "Weather Bot")
    page.fill(f"{form} input[name=custom_id]", "weather_bot")
    page.select_option(f"{form} select[name=connection_mode]", "websocket")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("[data-secrets=shown]")
    secret = {name: page.inner_text(f"[data-secrets=shown] code[data-secret={name}]") for name in
              ("agent_id", "agent_token", "x25519_private_jwk", "ed25519_private_jwk")}
    assert "Shown once" in page.inner_text("[data-secrets=shown]") and "rotated" in page.inner_text("[data-secrets=shown]")
    assert secret["agent_token"].startswith(f"agt_{org.slug}_")
    x_jwk, e_jwk = json.loads(secret["x25519_private_jwk"]), json.loads(secret["ed25519_private_jwk"])
    assert (x_jwk["crv"], e_jwk["crv"]) == ("X25519", "Ed25519")
    with org.context():
        profile = IdentityProfile.objects.get(agent__name="weather_bot")
        assert profile.agent_id == secret["agent_id"] and profile.creator_id == org.user.username
        [keyset] = AgentKeySet.objects.filter(agent_id=profile.agent_id)
    assert keyset.public_key == public_of(x_jwk) and keyset.signing_public_key == public_of(e_jwk)

    # Step 7: into the keystore, encrypted under the protection password.
    page.fill("[data-secrets=shown] input[name=keystore_password]", KEYSTORE_PASSWORD)
    page.click("[data-secrets=shown] .keystore-save button")
    page.wait_for_selector(".keystore-save[data-saved]", timeout=60000)  # the passphrase key derivation is slow on a loaded machine

    # Steps 8–9: the artifact_response carries only agent_id and display_name; the system agent answers.
    assistant_said(page, "✓ created Weather Bot (weather_bot)")  # the custom id, as the identity pages show it
    shoot(page, "guided-created")
    with org.context():
        messages = list(Message.objects.order_by("conversation_id", "position"))
    reported = [json.loads(m.content) for m in messages if m.role == "user" and m.content.startswith("{")]
    assert reported == [{"msg_subtype": "artifact_response",
                         "artifact": {"subtype": "agent_created", "payload": {"agent_id": secret["agent_id"], "display_name": "Weather Bot"}}}]
    everything = json.dumps([[m.content, m.tool_calls] for m in messages])
    for value in (secret["agent_token"], x_jwk["d"], e_jwk["d"]):
        assert value not in everything

    # Shown once: gone when dismissed, and from every later page.
    page.click("[data-secrets=shown] >> text=I saved them — hide")
    page.wait_for_selector("[data-secrets=hidden]")
    assert secret["agent_token"] not in page.content() and x_jwk["d"] not in page.content()
    for path in (page.url, "/console/identity/", "/console/identity/keys/"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        assert secret["agent_token"] not in page.content() and x_jwk["d"] not in page.content() and e_jwk["d"] not in page.content()
    page.wait_for_selector("#keystore[data-state=locked]")


def test_the_end_of_a_round_leaves_the_caret_in_the_form_the_user_is_typing_in(page, make_org, login):
    """A round that ends while the user types in a form (the one a round drew) must not move the
    caret to the chat input: the rest of their typing went there (beside a CPU hog the creation
    flow above failed so: the display name arrived empty). The second round's answer is held here
    until the user is in the form, then let through."""
    form = creation_form(page, make_org("gf"), login)
    page.wait_for_selector("#chat-send:not([disabled])")  # the first round is over
    assert page.evaluate("document.activeElement.id") == "chat-input"  # nobody typing elsewhere: the caret is back
    held = []

    def hold_the_round(route):
        held.append((route, route.fetch()))  # answered now, handed to the page later

    page.route("**/v1/agents/chat", hold_the_round)
    say(page, "/help")
    page_until(page, lambda: held, what="the second round to reach the route")  # the page's route handlers run while it waits
    [(route, answer)] = held
    page.click(f"{form} input[name=display_name]")
    page.keyboard.type("We")
    route.fulfill(response=answer)
    page.wait_for_selector("#chat-send:not([disabled])")  # the second round is over
    page.keyboard.type("ather")

    assert page.input_value(f"{form} input[name=display_name]") == "Weather"
    assert page.input_value("#chat-input") == ""


def test_the_delete_confirm_shows_the_cascade_and_reports_back(page, make_org, login):
    from tests.identity.conftest import create_agent

    org = make_org("gd")
    created = create_agent(org.client, display_name="Old Bot", custom_id="old_bot").json()
    login(page, org)
    open_system_chat(page)
    say(page, "/delete-agent old_bot")
    page.wait_for_selector("[data-artifact=agent_deletion_confirm] .cascade-preview")
    assert "ends 0 relations with 0 users" in page.inner_text("[data-artifact=agent_deletion_confirm]")
    page.click("[data-artifact=agent_deletion_confirm] button.danger")
    assistant_said(page, "✓ deleted Old Bot.")
    with org.context():
        assert not IdentityProfile.objects.exists()


CRAFTED = {
    "endpoint_not_allowed": {"endpoint": "POST /v1/agents/evil/run", "auth": "user_jwt"},
    "auth_refused": {"endpoint": "POST /v1/identity/agents", "auth": "admin"},
    "jsonpath_refused": {"endpoint": "POST /v1/identity/agents", "auth": "user_jwt",
                         "after_success": {"endpoint": "POST /v1/identity/agents/:id/keys/register", "auth": "agent_token",
                                           "params_from_response": {":id": "$..token"}}},
}


def crafted_form(client_action: dict, allowed=("agent_id", "display_name")) -> dict:
    return {"msg_subtype": "artifact_form", "artifact": {
        "subtype": "agent_creation_form", "client_action": {**client_action, "allowed_endpoints": [client_action["endpoint"]]},
        "schema": {"display_name": {"type": "string", "required": True}},
        "post_success_artifact": {"subtype": "agent_created", "msg_subtype": "artifact_response", "allowed_fields": list(allowed),
                                  "forbidden_fields": []}}}


RENDER = """message => {
  const node = window.Artifacts.render(message, {conversationId: () => 'conv_crafted', send: () => Promise.resolve()});
  document.getElementById('chat-messages').appendChild(node);
  return {refused: node.dataset.refused || null, form: !!node.querySelector('form')};
}"""


def test_crafted_forms_are_refused_by_the_executor_and_reported(page, make_org, login, shoot):
    org = make_org("ga")
    login(page, org)
    open_system_chat(page)
    requested = []
    page.on("request", lambda r: requested.append(r.url))
    forms = {kind: crafted_form(action) for kind, action in CRAFTED.items()}
    forms["field_refused"] = crafted_form({"endpoint": "POST /v1/identity/agents", "auth": "user_jwt"}, allowed=("agent_id", "agent_token"))

    results = {kind: page.evaluate(RENDER, message) for kind, message in forms.items()}

    assert results == {kind: {"refused": kind, "form": False} for kind in forms}
    shoot(page, "guided-crafted-refused")
    with org.context():
        wait_until(lambda: ClientAnomaly.objects.count() == 4, what="four anomalies")
        rows = {a.kind: a for a in ClientAnomaly.objects.all()}
    assert set(rows) == set(forms)
    assert rows["endpoint_not_allowed"].endpoint == "POST /v1/agents/evil/run"
    assert rows["endpoint_not_allowed"].detail["where"] == "client_action.endpoint"
    assert rows["auth_refused"].detail["value"] == "admin"
    assert rows["jsonpath_refused"].detail["value"] == "$..token"
    assert rows["field_refused"].detail["field"] == "agent_token"
    assert {a.user_id for a in rows.values()} == {org.user.username} and {a.conversation_id for a in rows.values()} == {"conv_crafted"}
    assert not any("/v1/agents/evil" in url for url in requested)

    # The executor's own doors: no call off the list, no agent token without "agent_token" auth,
    # and a reply never carries a forbidden field even from a plan built by hand.
    attacks = page.evaluate("""async () => {
      const CA = window.ClientAction, out = {};
      try { await CA.call({endpoint: 'POST /v1/agents/evil/run', auth: 'user_jwt'}, {}); out.offList = 'called'; } catch (e) { out.offList = e.kind; }
      try { await CA.call({endpoint: 'DELETE /v1/identity/agents/:id', auth: 'user_jwt'}, {params: {':id': '../../agents/x'}}); out.traversal = 'called'; } catch (e) { out.traversal = e.kind; }
      try { CA.paramsFrom({endpoint: 'POST /v1/identity/agents/:id/keys/register', fromResponse: {':id': 'agent_id'}}, {agent_id: {nested: 1}}); out.nested = 'taken'; } catch (e) { out.nested = e.kind; }
      const plan = {reply: {subtype: 'agent_created', allowed: ['agent_id', 'agent_token', 'webhook_secret', 'x25519_private_key', 'display_name'], forbidden: []}};
      out.reply = CA.reply(plan, [{agent_id: 'ext_1', agent_token: 'agt_x', webhook_secret: 'whsec_x', x25519_private_key: 'k',
                                   display_name: 'agt_a_0123456789abcdef_' + 'ab'.repeat(24)}]);
      return out;
    }""")
    assert attacks["offList"] == "endpoint_not_allowed" and attacks["traversal"] == "param_refused" and attacks["nested"] == "param_refused"
    assert attacks["reply"] == {"msg_subtype": "artifact_response", "artifact": {"subtype": "agent_created", "payload": {"agent_id": "ext_1"}}}


def keys_page(page):
    page.goto("/console/identity/keys/")
    page.wait_for_function("document.getElementById('keystore').dataset.state !== ''")


def add_agent_keys(page, agent_id: str) -> dict:
    """Put one freshly generated agent key set into the unlocked keystore; return its private JWKs' d values."""
    return page.evaluate("""async id => {
      const k = await window.AgentKeys.generate();
      await window.Keystore.add({agent_id: id, display_name: 'Restored Bot', x25519: k.x25519, ed25519: k.ed25519});
      return {x: k.x25519.privateJwk.d, e: k.ed25519.privateJwk.d};
    }""", agent_id)


def create_keystore(page):
    keys_page(page)
    page.fill("#keystore-create input[name=password]", KEYSTORE_PASSWORD)
    page.click("#keystore-create button")
    page.wait_for_selector("#keystore[data-state=unlocked]")


def test_keystore_unlocks_with_the_right_password_only(page, make_org, login):
    org = make_org("gk")
    login(page, org)
    create_keystore(page)
    d = add_agent_keys(page, "ext_kept")
    stored = page.evaluate("""() => new Promise(r => { const o = indexedDB.open('agents-keystore', 1);
      o.onsuccess = () => { const g = o.result.transaction('kv').objectStore('kv').get('vault'); g.onsuccess = () => r(JSON.stringify(g.result)); }; })""")
    assert d["x"] not in stored and d["e"] not in stored and "ext_kept" not in stored  # encrypted at rest
    page.click("#keystore-lock")
    page.wait_for_selector("#keystore[data-state=locked]")

    page.fill("#keystore-unlock input[name=password]", "wrong password")
    page.click("#keystore-unlock button")
    page.wait_for_selector("#keystore-error:not([hidden])")
    assert page.inner_text("#keystore-error") == "Wrong password: the keystore stays locked."
    assert page.get_attribute("#keystore", "data-state") == "locked"

    page.fill("#keystore-unlock input[name=password]", KEYSTORE_PASSWORD)
    page.click("#keystore-unlock button")
    page.wait_for_selector("#keystore[data-state=unlocked]")
    assert page.inner_text("#keystore-agents tr[data-agent=ext_kept]").startswith("Restored Bot")
    assert d["x"] not in page.content()  # the page lists public halves only


def blob_of(org) -> dict:
    with org.context():
        return json.loads(base64.b64decode(KeyBackup.objects.get(user_id=org.user.username).blob))


def test_passkey_prf_backup_restores_after_the_profile_is_wiped(browser, console_server, make_org, login):
    # WebAuthn needs a domain as RP id (not an IP address): this context talks to localhost.
    org = make_org("gp")
    context = browser.new_context(base_url=console_server.url.replace("127.0.0.1", "localhost"))
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        cdp = context.new_cdp_session(page)
        cdp.send("WebAuthn.enable")
        cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
            "protocol": "ctap2", "ctap2Version": "ctap2_1", "transport": "internal", "hasResidentKey": True,
            "hasUserVerification": True, "isUserVerified": True, "hasPrf": True, "automaticPresenceSimulation": True}})
        login(page, org)
        create_keystore(page)
        d = add_agent_keys(page, "ext_passkey")
        page.click("#backup-passkey")
        page.wait_for_function("document.getElementById('keystore-message').textContent.startsWith('✓ Backed up with your Passkey')")
        blob = blob_of(org)
        assert blob["v"] == 2 and blob["kdf"] == "webauthn-prf" and set(blob) == {"v", "kdf", "credential_id", "prf_salt", "hkdf_salt", "iv", "ciphertext"}
        assert d["x"] not in json.dumps(blob) and "ext_passkey" not in json.dumps(blob)

        # A fresh profile: cookies and this origin's IndexedDB gone; the Passkey stays on its authenticator.
        page.evaluate("() => new Promise(r => { const q = indexedDB.deleteDatabase('agents-keystore'); q.onsuccess = q.onerror = () => r(); })")
        context.clear_cookies()
        login(page, org)
        keys_page(page)
        assert page.get_attribute("#keystore", "data-state") == "none"
        page.fill("#restore-form input[name=new_password]", "a new protection password")
        page.click("#restore-form button")
        page.wait_for_function("document.getElementById('keystore-message').textContent === '✓ Restored 1 identity agent key set.'")
        page.wait_for_selector("#keystore[data-state=unlocked] tr[data-agent=ext_passkey]")
        restored = page.evaluate("() => window.Keystore.agents()[0].x25519.privateJwk.d")
        assert restored == d["x"]
    finally:
        context.close()


def test_password_backup_restores_in_a_new_browser_context(browser, console_server, page, make_org, login):
    org = make_org("gw")
    login(page, org)
    create_keystore(page)
    d = add_agent_keys(page, "ext_password")
    page.fill("#backup-password input[name=password]", "backup password 1")
    page.click("#backup-password button")
    page.wait_for_function("document.getElementById('keystore-message').textContent.startsWith('✓ Backed up with the password')")
    assert blob_of(org)["kdf"] == "pbkdf2-sha256" and d["e"] not in json.dumps(blob_of(org))

    fresh = browser.new_context(base_url=console_server.url)
    fresh.set_default_timeout(15_000)
    other = fresh.new_page()
    try:
        login(other, org)
        keys_page(other)
        assert other.get_attribute("#keystore", "data-state") == "none"
        other.fill("#restore-form input[name=new_password]", "new protection password")
        other.fill("#restore-form input[name=backup_password]", "not the backup password")
        other.click("#restore-form button")
        other.wait_for_selector("#keystore-error:not([hidden])")
        assert other.get_attribute("#keystore", "data-state") == "none"
        other.fill("#restore-form input[name=new_password]", "new protection password")
        other.fill("#restore-form input[name=backup_password]", "backup password 1")
        other.click("#restore-form button")
        other.wait_for_selector("#keystore[data-state=unlocked] tr[data-agent=ext_password]")
        assert other.evaluate("() => window.Keystore.agents()[0].ed25519.privateJwk.d") == d["e"]
    finally:
        fresh.close()


def test_list_update_and_rotate_cards_act_with_the_users_credential(page, make_org, login):
    from identity.models import AgentCredential
    from tests.identity.conftest import create_agent

    org = make_org("gu")
    created = create_agent(org.client, display_name="Edit Bot", custom_id="edit_bot").json()
    login(page, org)
    open_system_chat(page)
    say(page, "/list-agents")
    page.wait_for_selector(f"[data-artifact=agent_list_display] tr[data-agent={created['agent_id']}]")
    page.click(f"[data-artifact=agent_list_display] tr[data-agent={created['agent_id']}] >> text=update")  # sends /update-agent edit_bot
    form = "[data-artifact=agent_update_form] form"
    page.wait_for_selector(form)
    assert page.input_value(f"{form} input[name=display_name]") == "Edit Bot"
    page.fill(f"{form} input[name=display_name]", "Edited Bot")
    page.click(f"{form} button[type=submit]")
    assistant_said(page, "✓ updated Edited Bot (edit_bot)")
    with org.context():
        assert IdentityProfile.objects.get(agent_id=created["agent_id"]).display_name == "Edited Bot"

    say(page, "/rotate-token Edited Bot")  # by the name it was given (issue 57 item 4)
    page.wait_for_selector("[data-artifact=agent_token_rotate_confirm] button.danger-outline")
    page.check("[data-artifact=agent_token_rotate_confirm] input[name=emergency]")
    page.click("[data-artifact=agent_token_rotate_confirm] button.danger-outline")
    page.wait_for_selector("[data-artifact=agent_token_rotate_confirm] [data-secrets=shown] code[data-secret=agent_token]")
    rotated = page.inner_text("[data-artifact=agent_token_rotate_confirm] code[data-secret=agent_token]")
    assert rotated.startswith("agt_") and rotated != created["agent_token"]
    assistant_said(page, "✓ rotated the token of Edited Bot (edit_bot); revoked the old token")
    # One id form in what the chat shows: the custom id, as the identity pages show it, never the internal id.
    assert created["agent_id"] not in page.inner_text("#chat-messages")
    assert "/update-agent edit_bot" in page.inner_text("#chat-messages")
    with org.context():
        assert AgentCredential.objects.filter(agent_id=created["agent_id"], revoked_at__isnull=False).count() == 1
        stored = json.dumps([[m.content, m.tool_calls] for m in Message.objects.all()])
    assert rotated not in stored and created["agent_token"] not in stored
