"""Talking to an identity agent end to end, in Chromium against a live daphne, with the SDKs' example
echo agents running as real processes (webhook mode through a real django-q2 cluster, and WebSocket
mode): the browser seals "hello", the agent answers "echo: hello", the browser opens and verifies it.
Then refusals (tampered, wrongly signed, replayed, re-addressed), rotations normal and emergency
mid-conversation, and the plaintext nowhere on the server's disk or in its logs."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from agents_identity.envelope import EnvelopeError, Party, Receiver, b64u, parse, seal, text_body, unb64u
from identity.models import Envelope, InboxItem
from tests.identity.conftest import bearer, create_agent, post
from tests.sdk.example_agents import EchoAgent, build_typescript_sdk, new_credentials
from tests.support.live import free_port
from tests.support.files import file_bytes
from tests.support.waiting import page_until

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "talk protection password"
REPLY = "li.agent.verified"


@pytest.fixture(scope="module")
def typescript_built():
    build_typescript_sdk()


@pytest.fixture
def qcluster(settings):
    """A real django-q2 cluster (webhook deliveries), allowed to deliver to 127.0.0.1."""
    from tests.support.qcluster import QCluster

    cluster = QCluster({"AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1", "AGENTS_Q_POLL_SECONDS": "0.1"}).start()
    yield cluster
    cluster.stop()


def start_agent(org, console_server, tmp_path: Path, *, sdk: str, mode: str, settings) -> tuple[EchoAgent, dict, object]:
    """Create an identity agent of `org` (API), write its agent.json, start the example agent, add it for the user."""
    port = free_port()
    fields = {"connection_mode": mode, "display_name": f"Echo {sdk}", "custom_id": f"echo_{sdk[:2]}_{mode[:2]}_{secrets.token_hex(2)}"}
    if mode == "webhook":
        settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
        fields["webhook_url"] = f"http://127.0.0.1:{port}/hook"
    created = create_agent(org.client, **fields).json()
    credentials = new_credentials(console_server.url, created, webhook=mode == "webhook")
    path = tmp_path / f"agent-{sdk}-{mode}.json"
    credentials.save(path)
    assert post(org.client, f"/v1/identity/agents/{created['agent_id']}/relations").status_code == 201
    agent = EchoAgent(sdk=sdk, mode=mode, credentials_path=path, log_path=tmp_path / f"agent-{sdk}-{mode}.log", port=port)
    agent.start(register=True)
    return agent, created, credentials


def open_conversation(page, agent_id: str, *, create: bool = True):
    page.goto(f"/console/identity/talk/{agent_id}/")
    page.wait_for_selector("#talk[data-state=locked] #talk-unlock-form")
    page.fill("#talk-unlock-form input[name=password]", PASSWORD)
    page.click("#talk-unlock-form button")
    page.wait_for_selector("#talk[data-state=ready][data-loaded='1']")


def send(page, text: str):
    page.fill("#talk-input", text)
    page.click("#talk-send")


def replies(page) -> list[str]:
    return page.eval_on_selector_all(f"#talk-messages {REPLY} .bubble", "nodes => nodes.map(n => n.textContent)")


def wait_reply(page, text: str, count: int = 1, timeout: int = 45_000):
    page.wait_for_function(
        "([sel, text, count]) => Array.from(document.querySelectorAll(sel)).filter(n => n.textContent === text).length >= count",
        arg=[f"#talk-messages {REPLY} .bubble", text, count], timeout=timeout)


@pytest.mark.parametrize("sdk,mode", [("python", "websocket"), ("python", "webhook"), ("typescript", "websocket"), ("typescript", "webhook")])
def test_hello_round_trip_with_each_example_agent(request, page, make_org, login, console_server, tmp_path, settings, sdk, mode, shoot):
    if sdk == "typescript":
        request.getfixturevalue("typescript_built")
    if mode == "webhook":
        request.getfixturevalue("qcluster")
    org = make_org(f"t{sdk[0]}{mode[1]}")
    agent, created, credentials = start_agent(org, console_server, tmp_path, sdk=sdk, mode=mode, settings=settings)
    try:
        login(page, org)
        open_conversation(page, created["agent_id"])
        send(page, "hello")
        wait_reply(page, "echo: hello")
        reply = page.locator(f"#talk-messages {REPLY}").last
        seal_line = reply.locator(".seal").inner_text()
        assert f"signed by Echo {sdk}" in seal_line and credentials.keys.signing_kid[:8] in seal_line
        assert page.locator("#talk-messages li.user .bubble").last.inner_text() == "hello"
        agent.wait_for("opened envelope")
        with org.context():
            stored = list(Envelope.objects.filter(agent_id=created["agent_id"]).order_by("id"))
        assert [e.direction for e in stored] == ["to_agent", "to_user"]
        assert all(e.body.startswith("v1.") and b"hello" not in e.body.encode() for e in stored)
        if mode == "webhook":
            # Webhook deliveries pass through more of the server (delivery rows, the task workers):
            # after a round trip with words found nowhere else, they are in none of its files or logs.
            words = f"walrus {secrets.token_hex(6)}"
            send(page, words)
            wait_reply(page, f"echo: {words}")
            cluster = request.getfixturevalue("qcluster")
            assert grep_server(org, console_server, cluster.log(), [words.encode()]) == []
            assert cluster.log_path.exists() and console_server.log_path.exists()
        if (sdk, mode) == ("python", "websocket"):
            # The user's keys: made here, kept in the (encrypted) keystore, public halves registered in the org.
            kept = page.evaluate("u => window.Keystore.userKeys(u)", org.user.get_username())
            registered = org.client.get("/v1/identity/users/me/keys").json()["keys"]
            assert [k["status"] for k in registered] == ["current"]
            assert registered[0]["public_key"] == kept["x25519"]["publicKey"] and registered[0]["signing_public_key"] == kept["ed25519"]["publicKey"]
            vault = page.evaluate("""() => new Promise(r => { const o = indexedDB.open('agents-keystore', 1);
              o.onsuccess = () => { const g = o.result.transaction('kv').objectStore('kv').get('vault'); g.onsuccess = () => r(JSON.stringify(g.result)); }; })""")
            assert kept["x25519"]["privateJwk"]["d"] not in vault and kept["ed25519"]["privateJwk"]["d"] not in vault
            shoot(page, "talk-1280")
            page.set_viewport_size({"width": 390, "height": 844})
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            assert page.locator("#talk-send").is_visible() and page.locator(f"#talk-messages {REPLY}").last.is_visible()
            shoot(page, "talk-390")
    finally:
        agent.stop()


def grep_server(org, console_server, qcluster_log: str, needles: list[bytes]) -> list[str]:
    """Return every file of the org's store (database, WAL, SHM), the default database and the server
    logs that holds one of `needles`."""
    from django.conf import settings
    from django.db import connections

    org_dir = Path(settings.AGENTS_DATA_DIR) / "orgs" / org.slug
    candidates = [p for p in org_dir.rglob("*") if p.is_file()]
    default = Path(str(connections["default"].settings_dict["NAME"]))
    candidates += [p for p in default.parent.glob(default.name + "*") if p.is_file()]
    candidates += [console_server.log_path]
    found = [str(p) for p in candidates if any(n in file_bytes(p) for n in needles)]
    found += ["qcluster log" for n in needles if n in qcluster_log.encode()]
    return found


def test_refusals_rotations_and_no_plaintext_on_the_server(page, make_org, login, console_server, tmp_path, settings, shoot):
    org = make_org("tr")
    agent, created, credentials = start_agent(org, console_server, tmp_path, sdk="python", mode="websocket", settings=settings)
    agent_id, user = created["agent_id"], org.user.get_username()
    secret_words = f"zebra quartz {secrets.token_hex(6)}"
    try:
        login(page, org)
        open_conversation(page, agent_id)
        send(page, "hello")
        wait_reply(page, "echo: hello")
        send(page, secret_words)
        wait_reply(page, f"echo: {secret_words}")

        # Nothing readable reached the server: its org files (database, WAL), the default database, its log.
        from django.conf import settings as live_settings

        assert grep_server(org, console_server, "", [secret_words.encode(), b"echo: hello"]) == []
        org_files = sorted(p.name for p in (Path(live_settings.AGENTS_DATA_DIR) / "orgs" / org.slug).rglob("*") if p.is_file())
        assert any(name.endswith(".db") for name in org_files), org_files
        with org.context():  # the envelopes are there, sealed: the grep looked where they are
            assert Envelope.objects.filter(agent_id=agent_id).count() == 4

        # --- refusals, each with a clear message -------------------------------------------------
        keys = org.client.get(f"/v1/identity/agents/{agent_id}/users/{user}/keys", **bearer(created["agent_token"])).json()["keys"]
        import base64

        user_key = base64.b64decode([k for k in keys if k["status"] == "current"][0]["public_key"])
        me, them = Party("agent", agent_id), Party("user", user)

        def agent_sends(envelope: str) -> None:
            sent = post(org.client, f"/v1/identity/users/{user}/messages", {"envelope": envelope}, **bearer(created["agent_token"]))
            assert sent.status_code == 201, sent.json()

        good = seal(body=text_body("tampered"), sender=me, recipient=them, recipient_key=user_key, signing_key=credentials.keys.ed25519)
        parts = good.split(".")
        flipped = bytearray(unb64u(parts[2]))
        flipped[-3] ^= 1
        resealed = ".".join(["v1", parts[1], b64u(bytes(flipped))])
        agent_sends(resealed + "." + b64u(credentials.keys.ed25519.sign(resealed.encode())))  # signed, but the ciphertext was altered
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        forged = seal(body=text_body("forged"), sender=me, recipient=them, recipient_key=user_key, signing_key=credentials.keys.ed25519)
        fparts = forged.split(".")
        agent_sends(".".join(fparts[:3] + [b64u(Ed25519PrivateKey.generate().sign(".".join(fparts[:3]).encode()))]))  # skid names the agent's key
        page.wait_for_selector("#talk-messages li.refused[data-refused=cannot_decrypt]")
        page.wait_for_selector("#talk-messages li.refused[data-refused=bad_signature]")
        assert "does not decrypt" in page.inner_text("#talk-messages li.refused[data-refused=cannot_decrypt] .bubble")
        assert "signature does not verify" in page.inner_text("#talk-messages li.refused[data-refused=bad_signature] .bubble")

        # A replay: the platform refuses a repeated message id (409) …
        replayed = seal(body=text_body("only once"), sender=me, recipient=them, recipient_key=user_key, signing_key=credentials.keys.ed25519)
        agent_sends(replayed)
        again = post(org.client, f"/v1/identity/users/{user}/messages", {"envelope": replayed}, **bearer(created["agent_token"]))
        assert again.status_code == 409 and again.json()["code"] == "envelope_replayed"
        wait_reply(page, "only once")
        # … and if a compromised server delivered it again anyway, the browser refuses it.
        from django.utils import timezone

        with org.context():
            row = Envelope.objects.create(public_id="env_" + secrets.token_hex(16), direction="to_user", agent_id=agent_id, user_id=user,
                                          body=replayed, size_bytes=len(replayed), created_at=timezone.now())
            InboxItem.objects.create(user_id=user, kind="envelope", agent_id=agent_id, envelope=row, created_at=timezone.now())
        from identity import live

        live.wake_inbox(org.slug, user)
        page.wait_for_selector("#talk-messages li.refused[data-refused=replayed]", timeout=20_000)
        assert "already received once" in page.inner_text("#talk-messages li.refused[data-refused=replayed] .bubble")
        assert replies(page).count("only once") == 1

        # Re-addressed to another agent: the platform refuses it, and the other agent cannot open it.
        with org.context():
            browser_sealed = Envelope.objects.filter(agent_id=agent_id, direction="to_agent").order_by("id").first().body
        other = create_agent(org.client, custom_id="other_" + secrets.token_hex(3)).json()
        other_creds = new_credentials(console_server.url, other, webhook=False)
        assert post(org.client, f"/v1/identity/agents/{other['agent_id']}/keys/register",
                    {"public_key": other_creds.keys.public_key, "signing_public_key": other_creds.keys.signing_public_key},
                    **bearer(other["agent_token"])).status_code == 200
        refused = post(org.client, f"/v1/identity/agents/{other['agent_id']}/messages", {"envelope": browser_sealed})
        assert refused.status_code == 400 and f"addressed to agent {agent_id}" in refused.json()["error"]
        other_receiver = Receiver(me=Party("agent", other["agent_id"]), private_keys=other_creds.keys.decryption_keys(), signer=lambda s, k: None)
        with pytest.raises(EnvelopeError) as not_for_it:
            other_receiver.open(browser_sealed)
        assert not_for_it.value.code == "not_addressed_to_you" and "addressed to someone else" in str(not_for_it.value)
        assert parse(browser_sealed).header.recipient == Party("agent", agent_id)
        shoot(page, "talk-refusals")

        # --- a normal rotation mid-conversation: the old key stays in grace -----------------------
        # Rotations go through the live server: its channel layer reaches the agent's socket.
        import httpx

        def rotate(emergency: bool) -> str:
            answer = httpx.post(f"{console_server.url}/v1/identity/agents/{agent_id}/token/regenerate", json={"emergency": emergency},
                                headers={"Authorization": f"Bearer {org.key}"}, timeout=30)
            assert answer.status_code == 200, answer.text
            return answer.json()["agent_token"]

        token = rotate(False)
        agent.wait_for("security_alert agent.token_rotated")
        agent.stop()
        rotated = new_credentials(console_server.url, {**created, "agent_token": token}, webhook=False, previous=credentials.keys)
        rotated.save(agent.credentials_path)
        agent.start(register=True)
        send(page, "after rotation")  # the page still seals to the old key, which is in grace
        wait_reply(page, "echo: after rotation")
        last = page.locator(f"#talk-messages {REPLY}").last.locator(".seal").inner_text()
        assert rotated.keys.signing_kid[:8] in last  # signed by the new key, verified after re-reading the agent's keys
        send(page, "and again")
        wait_reply(page, "echo: and again")

        # --- an emergency rotation: revoked at once, said clearly --------------------------------
        emergency_token = rotate(True)
        agent.wait_for("security_alert agent.token_revoked")
        assert agent.wait_exit() == 0  # the socket was closed for good (4403): the example stops
        page.wait_for_selector("#talk-messages li.system[data-alert='agent.keys_revoked']")
        assert "emergency rotation" in page.inner_text("#talk-messages li.system[data-alert='agent.keys_revoked'] .bubble")
        send(page, "anyone there?")
        page.wait_for_selector("#talk-error:not([hidden])")
        assert "has no current key" in page.inner_text("#talk-error") and "not sent" in page.inner_text("#talk-error")
        # Reloaded, the replies signed with the revoked keys are refused, and say why.
        open_conversation(page, agent_id)
        page.wait_for_selector("#talk-messages li.refused[data-refused=signer_key_revoked]")
        assert "revoked (an emergency rotation)" in page.inner_text("#talk-messages li.refused[data-refused=signer_key_revoked] .bubble")
        assert replies(page) == []
        shoot(page, "talk-emergency")

        # --- a wrong key: a reply sealed to a user key this browser does not hold ----------------
        # (the user's keys changed elsewhere, e.g. another browser registered its own pair), from
        # the agent's keys registered after the emergency rotation: verified signer, unopenable.
        from agents_identity.keys import KeyPairs

        elsewhere, agent_now = KeyPairs(), KeyPairs()
        assert org.client.put("/v1/identity/users/me/keys", {"public_key": elsewhere.public_key, "signing_public_key": elsewhere.signing_public_key},
                              content_type="application/json").status_code == 201
        assert post(org.client, f"/v1/identity/agents/{agent_id}/keys/register",
                    {"public_key": agent_now.public_key, "signing_public_key": agent_now.signing_public_key}, **bearer(emergency_token)).status_code == 200
        wrong_key = seal(body=text_body("for the other browser"), sender=me, recipient=them, recipient_key=base64.b64decode(elsewhere.public_key),
                         signing_key=agent_now.ed25519)
        sent = post(org.client, f"/v1/identity/users/{user}/messages", {"envelope": wrong_key}, **bearer(emergency_token))
        assert sent.status_code == 201, sent.json()
        page.wait_for_selector("#talk-messages li.refused[data-refused=unknown_key]")
        assert "sealed to a key this browser does not hold" in page.inner_text("#talk-messages li.refused[data-refused=unknown_key] .bubble")
        assert replies(page) == []
    finally:
        agent.stop()


def test_the_readme_walk_from_create_agent_to_an_answer(page, make_org, login, console_server, tmp_path):
    """README "From /create-agent to a running agent", step by step: the agent is made by the system
    agent's form, the SDK reads the console's agent.json box as is (no --register: the console
    registered the keys), and the conversation is added and keyed from the page's own buttons."""
    org = make_org("tw")
    login(page, org)
    # 2. console → Chat → System agent: /create-agent Echo, connection websocket, Create; copy the "agent.json" box
    page.click(".sidebar >> text=Chat")
    page.select_option("#chat-with", "preset:system")
    page.fill("#chat-input", "/create-agent Echo")
    page.click("#chat-send")
    form = "[data-artifact=agent_creation_form] form"
    page.wait_for_selector(form)
    assert page.input_value(f"{form} input[name=display_name]") == "Echo"
    page.select_option(f"{form} select[name=connection_mode]", "websocket")
    page.click(f"{form} button[type=submit]")
    box = page.wait_for_selector("[data-secrets=shown] code[data-secret=agent_json]")
    path = tmp_path / "agent.json"
    path.write_text(box.inner_text())
    path.chmod(0o600)
    # 3–4. the example agent from the SDK, reading that file
    agent = EchoAgent(sdk="python", mode="websocket", credentials_path=path, log_path=tmp_path / "echo.log")
    agent.start()
    try:
        # 5. console → Conversations → Echo → Add Echo, choose a keystore password, send "hello"
        page.click(".sidebar >> text=Identity talk")
        page.click("#talk-agents tr:has-text('Echo') a.button")
        page.wait_for_selector("#talk[data-state=locked] #talk-unlock-form")
        page.click("#talk-add")
        page.wait_for_selector("#talk-relation", state="hidden")
        page.fill("#talk-unlock-form input[name=password]", PASSWORD)
        page.click("#talk-unlock-form button")
        page.wait_for_selector("#talk[data-state=ready][data-loaded='1']")
        send(page, "hello")
        wait_reply(page, "echo: hello")
        assert "signed by Echo" in page.locator(f"#talk-messages {REPLY}").last.locator(".seal").inner_text()
        agent.wait_for("opened envelope")

        # What the user types while a message is on its way is theirs: the send does not wipe it.
        held = []
        page.route("**/v1/identity/agents/*/messages", lambda route: held.append((route, route.fetch())) if route.request.method == "POST" else route.continue_())
        send(page, "again")
        page_until(page, lambda: held, what="the send to reach the route")  # the page's route handlers run while it waits
        assert page.input_value("#talk-input") == ""
        page.fill("#talk-input", "next thought")
        route, answer = held[0]
        route.fulfill(response=answer)
        wait_reply(page, "echo: again")
        assert page.input_value("#talk-input") == "next thought"
    finally:
        agent.stop()


VECTORS_IN_PAGE = """async (V) => {
  const E = window.AgentsEnvelope;
  const signers = new Map(V.signers.map(s => [`${s.party.type}:${s.party.id}:${s.kid}`, {publicKey: E.fromBase64(s.public_key), status: s.status}]));
  async function receiver(name) {
    const p = V.parties[name];
    const keys = await E.KeyPairs.fromJwks(p.x25519_private_jwk, p.ed25519_private_jwk, p.previous_x25519_private_jwks);
    return new E.Receiver({me: p.party, keys: keys.decryptionKeys(), signer: (s, skid) => signers.get(`${s.type}:${s.id}:${skid}`) || null,
                           replay: new E.ReplayWindow(V.replay_window_seconds)});
  }
  const out = {opened: {}, refused: {}, replay: []};
  for (const c of V.open) {
    const o = await (await receiver(c.receiver)).open(c.envelope, {sender: c.sender, now: V.now});
    out.opened[c.name] = {mid: o.mid, body: o.body, signer_kid: o.signerKid, recipient_kid: o.recipientKid};
  }
  for (const c of V.refuse) {
    try { await (await receiver(c.receiver)).open(c.envelope, {sender: c.sender, now: V.now}); out.refused[c.name] = "OPENED"; }
    catch (e) { out.refused[c.name] = [e.code || String(e), e.message]; }
  }
  const r = await receiver(V.replay.receiver);
  out.replay.push((await r.open(V.replay.envelope, {sender: V.replay.sender, now: V.now})).text);
  try { await r.open(V.replay.envelope, {sender: V.replay.sender, now: V.now + 1}); out.replay.push("OPENED"); } catch (e) { out.replay.push(e.code); }
  return out;
}"""


def test_the_consoles_bundle_opens_and_refuses_the_shared_vectors_in_chromium(page, console_server):
    """The browser is an implementation too (Chromium's WebCrypto X25519/Ed25519 under the bundle):
    every vector opens or is refused with its code, as in Python and Node."""
    from agents_identity.envelope import REASONS
    from tests.sdk.vectors import VECTORS

    page.goto("/console/login/")
    page.add_script_tag(url="/static/console/vendor/agents-envelope.js")
    page.wait_for_function("!!window.AgentsEnvelope")
    out = page.evaluate(VECTORS_IN_PAGE, VECTORS)
    assert out["opened"] == {c["name"]: c["expect"] for c in VECTORS["open"]}
    assert {name: code for name, (code, _) in out["refused"].items()} == {c["name"]: c["error"] for c in VECTORS["refuse"]}
    assert all(message.startswith(REASONS[code]) for code, message in out["refused"].values())
    assert out["replay"] == ["once", "replayed"]


def test_the_users_keys_travel_in_the_keystore_backup_to_a_new_browser(browser, page, make_org, login, console_server, tmp_path, settings):
    """Item 2: the keystore's backup holds the user's own pairs. Backed up here, restored in a fresh
    browser context, the conversation opens the earlier reply there and registers nothing new."""
    from tests.console.test_browser_guided import keys_page

    org = make_org("tk")
    agent, created, _ = start_agent(org, console_server, tmp_path, sdk="python", mode="websocket", settings=settings)
    try:
        login(page, org)
        open_conversation(page, created["agent_id"])
        send(page, "hello")
        wait_reply(page, "echo: hello")
        registered = org.client.get("/v1/identity/users/me/keys").json()["keys"]
        keys_page(page)
        page.fill("#keystore-unlock input[name=password]", PASSWORD)
        page.click("#keystore-unlock button")
        page.wait_for_selector("#keystore[data-state=unlocked]")
        page.fill("#backup-password input[name=password]", "backup password 1")
        page.click("#backup-password button")
        page.wait_for_function("document.getElementById('keystore-message').textContent.startsWith('✓ Backed up with the password')")
    finally:
        agent.stop()

    fresh = browser.new_context(base_url=console_server.url)
    fresh.set_default_timeout(30_000)
    other = fresh.new_page()
    try:
        login(other, org)
        keys_page(other)
        other.fill("#restore-form input[name=new_password]", PASSWORD)
        other.fill("#restore-form input[name=backup_password]", "backup password 1")
        other.click("#restore-form button")
        other.wait_for_selector("#keystore[data-state=unlocked]")
        open_conversation(other, created["agent_id"])
        wait_reply(other, "echo: hello")
        assert other.locator("#talk-messages li.refused").count() == 0
        assert org.client.get("/v1/identity/users/me/keys").json()["keys"] == registered  # the same pair: nothing re-registered
    finally:
        fresh.close()
