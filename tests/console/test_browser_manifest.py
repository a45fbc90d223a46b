"""An identity agent's page shows its capability manifest (issue 55): its skills, transports,
envelope version and signing key, and whether the signature verifies with the agent's registered
Ed25519 key (checked by the server, as the API does) — "none registered", "verifies" and "does not
verify" (after an emergency rotation made in the console), in Chromium at 1280 and 390 px."""

from __future__ import annotations

import secrets

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agents_identity.envelope import kid
from agents_identity.manifest import build_manifest, sign_manifest
from tests.console.test_browser_views import PHONE, assert_fits
from tests.console.test_crawl import _AXE_RUN, AXE
from tests.identity.conftest import AgentKeys, bearer, create_agent, post

pytestmark = pytest.mark.django_db(transaction=True)

LONG_SKILL = "Summarises a long thread into a short answer, keeping every name, number and date it quotes " * 2


def axe_problems(page) -> list[str]:
    """Return axe-core's serious and critical violations on the open page (the console crawl's rules)."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate(_AXE_RUN)


def identity_agent_with_key(org, custom_id: str) -> tuple[dict, Ed25519PrivateKey]:
    """Create a websocket identity agent and register a fresh key set; return `(created, signing_key)`."""
    created = create_agent(org.client, display_name="Summariser", custom_id=custom_id, connection_mode="websocket").json()
    keys = AgentKeys(ed25519=Ed25519PrivateKey.generate())
    registered = post(org.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", keys.body(webhook=False),
                      **bearer(created["agent_token"]))
    assert registered.status_code == 200, registered.content
    return created, keys.ed25519


def register_manifest(org, created: dict, signing_key: Ed25519PrivateKey) -> dict:
    card = build_manifest(name=created["custom_id"], description="Summarises threads", transports=["websocket", "webhook"],
                          messages_url=f"https://agents.example/v1/identity/agents/{created['agent_id']}/messages")
    card["skills"] = [{"id": "summarise-a-very-long-thread-identifier-without-any-break", "name": "Summarise",
                       "description": LONG_SKILL, "tags": ["text", "summary"]},
                      {"id": "translate", "name": "Translate", "description": "Into any language", "tags": ["text"]}]
    signed = sign_manifest(card, signing_key)
    answer = post(org.client, f"/v1/identity/agents/{created['agent_id']}/manifest", {"manifest": signed}, **bearer(created["agent_token"]))
    assert answer.status_code == 201, answer.content
    return signed


def test_the_page_says_none_is_registered_then_shows_the_manifest_and_that_it_verifies(page, make_org, login, shoot):
    org = make_org("mf")
    custom_id = f"summariser_{secrets.token_hex(3)}"
    created, signing_key = identity_agent_with_key(org, custom_id)
    login(page, org)
    path = f"/console/agents/{custom_id}/"

    assert_fits(page, path)  # none registered: 1280, then 390 px
    assert page.get_attribute("#manifest", "data-state") == "none"
    assert "No manifest registered" in page.inner_text("#manifest-none")
    assert f"/v1/identity/agents/{created['agent_id']}/manifest" in page.inner_text("#manifest-none")

    register_manifest(org, created, signing_key)
    assert_fits(page, path)  # registered: 1280, then 390 px (left open)
    assert page.get_attribute("#manifest", "data-state") == "verifies"
    signature = page.inner_text("#manifest-signature")
    assert "Signature verifies" in signature and kid(signing_key) in signature and "current" in signature
    assert page.locator("#manifest-skills [data-skill]").evaluate_all("els => els.map(e => e.dataset.skill)") == [
        "summarise-a-very-long-thread-identifier-without-any-break", "translate"]
    assert page.is_visible("#manifest-skills [data-skill=translate]")
    assert page.locator("[data-fact=transports] .chip").all_inner_texts() == ["websocket", "webhook"]
    assert page.inner_text("[data-fact=envelope-version] dd") == "v1"
    assert kid(signing_key) in page.inner_text("[data-fact=signing-kid] dd")
    page.click("#manifest-card summary")
    assert '"urn:agents:manifest:v1"' in page.inner_text("#manifest-card pre")
    page_width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= page_width  # the card opened still fits 390 px
    shoot(page, "identity-manifest-phone")
    page.set_viewport_size({"width": 1280, "height": 800})
    shoot(page, "identity-manifest")
    assert axe_problems(page) == []


def test_after_an_emergency_rotation_in_the_console_the_manifest_does_not_verify(page, make_org, login, shoot):
    org = make_org("mfr")
    custom_id = f"summariser_{secrets.token_hex(3)}"
    created, signing_key = identity_agent_with_key(org, custom_id)
    register_manifest(org, created, signing_key)
    login(page, org)
    page.goto("/console/identity/")
    row = f"tr[data-agent='{created['agent_id']}']"
    page.on("dialog", lambda dialog: dialog.accept())
    page.check(f"{row} [data-emergency]")
    page.click(f"{row} [data-action=rotate]")
    page.wait_for_selector("#token-box:not([hidden])")

    page.goto("/console/identity/")
    page.click(f"{row} td[data-label=Agent] a")  # the agent's name leads to its manifest
    page.wait_for_url(f"**/console/agents/{custom_id}/#manifest")

    assert page.get_attribute("#manifest", "data-state") == "does-not-verify"
    signature = page.inner_text("#manifest-signature")
    assert "Signature does not verify" in signature and "revoked" in signature and kid(signing_key) in signature
    assert page.locator("#manifest-skills [data-skill]").count() == 2  # still shown, under the warning
    assert axe_problems(page) == []
    assert_fits(page, f"/console/agents/{custom_id}/")
    assert page.is_visible("#manifest-signature")
    shoot(page, "identity-manifest-not-verifying")
    page.set_viewport_size(PHONE)
