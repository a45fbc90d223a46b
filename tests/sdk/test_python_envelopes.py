"""sdk/python against the shared envelope vectors: every valid one opens, every bad one is refused
with its reason, a replay is refused the second time; and seal → open round trips."""

from __future__ import annotations

import pytest

from agents_identity.envelope import REASONS, EnvelopeError, Party, parse, seal, text_body
from agents_identity.keys import KeyPairs, key_from_jwk
from tests.sdk.vectors import VECTORS, party, receiver

NOW = VECTORS["now"]


@pytest.mark.parametrize("case", VECTORS["open"], ids=lambda c: c["name"])
def test_every_valid_vector_opens(case):
    opened = receiver(case["receiver"]).open(case["envelope"], sender=party(case["sender"]), now=NOW)
    assert opened.mid == case["expect"]["mid"]
    assert opened.body == case["expect"]["body"]
    assert opened.signer_kid == case["expect"]["signer_kid"] and opened.recipient_kid == case["expect"]["recipient_kid"]
    assert opened.sender == party(case["sender"])


@pytest.mark.parametrize("case", VECTORS["refuse"], ids=lambda c: c["name"])
def test_every_bad_vector_is_refused_with_its_reason(case):
    with pytest.raises(EnvelopeError) as refused:
        receiver(case["receiver"]).open(case["envelope"], sender=party(case["sender"]), now=NOW)
    assert refused.value.code == case["error"], str(refused.value)
    assert str(refused.value).startswith(REASONS[case["error"]])


def test_a_replayed_envelope_is_refused_the_second_time():
    case = VECTORS["replay"]
    echo = receiver(case["receiver"])
    assert echo.open(case["envelope"], sender=party(case["sender"]), now=NOW).text == "once"
    with pytest.raises(EnvelopeError) as refused:
        echo.open(case["envelope"], sender=party(case["sender"]), now=NOW + 1)
    assert refused.value.code == "replayed"


def test_a_refused_envelope_does_not_enter_the_window():
    # A forged copy (bad signature) of a message must not make the genuine one look replayed.
    [genuine] = [c for c in VECTORS["open"] if c["name"] == "user_to_agent_text"]
    [forged] = [c for c in VECTORS["refuse"] if c["name"] == "wrong_signature"]
    echo = receiver("echo")
    with pytest.raises(EnvelopeError):
        echo.open(forged["envelope"], now=NOW)
    assert echo.open(genuine["envelope"], now=NOW).text == "hello"


def test_seal_then_open_round_trips_and_binds_the_header():
    alice, echo = VECTORS["parties"]["alice"], VECTORS["parties"]["echo"]
    sealed = seal(body=text_body("round trip", reply_to="m" * 16), sender=party(alice["party"]), recipient=party(echo["party"]),
                  recipient_key=key_from_jwk(echo["x25519_private_jwk"]).public_key(), signing_key=key_from_jwk(alice["ed25519_private_jwk"]))
    header = parse(sealed).header
    assert header.recipient == Party("agent", echo["party"]["id"]) and header.rkid == echo["kid"] and header.skid == alice["skid"]
    opened = receiver("echo").open(sealed)
    assert opened.body == {"type": "text", "text": "round trip", "reply_to": "m" * 16}
    # A new pair: its own ids.
    keys = KeyPairs()
    assert keys.kid != echo["kid"] and len(keys.kid) == 16
