"""The streaming masker (issue 11 item 4): ordinary text goes out at once, only what could be a
credential is held back, and what finally streams equals the masked whole reply exactly —
for every rule of the credential corpus, the reply split at every boundary."""

from __future__ import annotations

import random

import pytest

from sessions.masking import StreamMasker
from sessions.scanner import _flatten, redact_text
from tests.sessions.test_scanner import REFERENCE_MISSES, secret_corpus
from sessions.secret_rules import RULES, platform_hits
from tests.support.credentials import credential_corpus, raw_values


def _replies() -> list[tuple[str, str]]:
    replies = [(rule, f"Sure. {text}\nAnything else?") for rule, text, _ in credential_corpus()]
    replies += [(name, "\n".join(_flatten(payload))) for name, payload, _ in secret_corpus()]
    replies += [(name, text) for name, text, _, _ in REFERENCE_MISSES]
    return replies


REPLIES = _replies()


def _streamed(pieces: list[str]) -> tuple[str, list[str]]:
    masker = StreamMasker()
    outs = [masker.feed(piece) for piece in pieces]
    outs.append(masker.finish())
    return "".join(outs), outs


def test_the_corpus_exercises_every_rule_of_the_platform():
    fired = {hit.rule for _, text, _ in credential_corpus() for hit in platform_hits(text)}
    assert fired == {rule.name for rule in RULES}


#: Replies up to this long are cut at every boundary; a longer one (a private key block, a JSON
#: service account: 15 of 260) at every boundary within NEAR characters of where a raw value starts
#: or ends, and at every STRIDE-th one elsewhere. Each cut re-scans the whole reply, so cutting a
#: 2,000-character reply everywhere cost 4 million characters of scanning (the file took minutes).
EVERY_CUT_UP_TO, NEAR, STRIDE = 400, 80, 7


def _cuts(reply: str, values: list[str]) -> list[int]:
    """The positions `reply` is cut at in two (0 and len(reply) included), see EVERY_CUT_UP_TO."""
    if len(reply) <= EVERY_CUT_UP_TO:
        return list(range(len(reply) + 1))
    cuts = set(range(0, len(reply) + 1, STRIDE)) | {len(reply)}
    for value in values:
        start = reply.find(value)
        while start != -1:
            for edge in (start, start + len(value)):
                cuts.update(range(max(0, edge - NEAR), min(len(reply), edge + NEAR) + 1))
            start = reply.find(value, start + 1)
    return sorted(cuts)


def test_long_replies_are_still_cut_around_every_raw_value():
    reply = "x" * 1000 + " sk-secret " + "y" * 1000
    cuts = _cuts(reply, ["sk-secret"])
    assert all(c in cuts for c in range(1001 - NEAR, 1010 + NEAR + 1))  # "sk-secret" is [1001, 1010)
    assert 0 in cuts and len(reply) in cuts and len(cuts) < len(reply) // 2
    assert _cuts("short", ["x"]) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("name, reply", REPLIES, ids=[name for name, _ in REPLIES])
def test_split_at_every_boundary_the_stream_equals_the_masked_reply(name, reply):
    whole = redact_text(reply)[0]
    values = raw_values(reply)
    assert values and whole != reply
    for cut in _cuts(reply, values):
        streamed, outs = _streamed([reply[:cut], reply[cut:]])
        assert streamed == whole, (name, cut)
    streamed, outs = _streamed(list(reply))  # one character at a time
    assert streamed == whole
    sent = ""
    for out in outs:  # no raw value is ever out, at any moment
        sent += out
        assert not any(value in sent for value in values)


@pytest.mark.parametrize("name, reply", REPLIES, ids=[name for name, _ in REPLIES])
def test_random_chunkings_stream_the_masked_reply(name, reply):
    rng = random.Random(name)
    whole = redact_text(reply)[0]
    for _ in range(30):
        cuts = sorted(rng.sample(range(1, len(reply)), k=min(len(reply) - 1, rng.randint(2, 12))))
        pieces = [reply[a:b] for a, b in zip([0, *cuts], [*cuts, len(reply)])]
        assert _streamed(pieces)[0] == whole


def test_ordinary_text_goes_out_at_once_except_the_word_being_written():
    masker = StreamMasker()
    assert masker.feed("Hello there, ") == "Hello there, "
    assert masker.feed("this is plain") == "this is "
    assert masker.held == len("plain")
    assert masker.feed(" text.\nNext") == "plain text.\n"
    assert masker.finish() == "Next"


def test_a_credential_is_held_until_it_resolves_then_goes_out_masked():
    token = "ghp_" + "aB3" * 12
    masker = StreamMasker()
    assert masker.feed("use ") == "use "
    assert masker.feed(token[:10]) == ""
    assert masker.feed(token[10:]) == ""
    out = masker.feed(" to push")
    assert out.startswith("[redacted:github-token:") and out.endswith(" to ") and token not in out
    assert masker.finish() == "push"


def test_a_private_key_is_held_from_its_header_to_its_end_line():
    text = next(text for name, text, _ in credential_corpus() if name == "private-key-rsa-pkcs1")
    key = text[text.index("-----BEGIN") : text.index("-----", text.index("-----END") + 8) + 5]
    head, block = key.split("\n", 1)
    masker = StreamMasker()
    assert masker.feed("the key: ") == "the key: "
    assert masker.feed(head[:15]) == "" and masker.feed(head[15:] + "\n") == ""  # a header is the start of a key: held
    body, tail = block.rsplit("-----END", 1)
    assert masker.feed(body) == ""  # the header is in, the END line is not: everything waits
    out = masker.feed("-----END" + tail + "\n")
    assert out.startswith("[redacted:private-key:")
    assert masker.emitted + masker.finish() == redact_text("the key: " + key + "\n")[0]


def test_a_header_that_is_not_a_private_key_is_released():
    masker = StreamMasker()
    assert masker.feed("-----BEGIN CERTIFICATE-----\n") == "-----BEGIN CERTIFICATE-----\n"
    assert masker.feed("BEGIN RSA keys are common. ") == "BEGIN RSA keys are common. "


def test_a_keyword_written_earlier_still_masks_the_value_after_it():
    value = "Qw8Er7Ty6Ui5Op4As3Df"
    masker = StreamMasker()
    assert masker.feed("password = ") == "password = "
    out = masker.feed(value + " ")
    assert out.startswith("[redacted:generic-secret:") and value not in out


def test_drop_forgets_what_is_held_back():
    masker = StreamMasker()
    masker.feed("partial ghp_abc")
    masker.drop()
    assert masker.emitted == "partial " and masker.finish() == ""


def test_a_long_line_is_masked_like_the_whole_reply():
    words = " ".join(f"word{i}" for i in range(600))
    token = "sk_live_" + "Zz9" * 10
    reply = f"{words} key {token} {words}"
    assert _streamed([reply[i : i + 7] for i in range(0, len(reply), 7)])[0] == redact_text(reply)[0]


@pytest.mark.parametrize("keyword, value", [
    ("password", "Xk9fQ2mLp7Rt4vWz8BnC3dHj"),
    ("aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
])
@pytest.mark.parametrize("gap", [300, 600, 2000])
def test_a_keyword_far_before_its_value_on_a_long_line_still_masks_it(keyword, value, gap):
    # The look-back of a long line is only 256+ characters: a keyword whose value follows a long
    # run of blanks must not fall out of it, or the value streams raw (the attack review's find).
    for pad in range(1100, 1900, 97):
        reply = "word " * (pad // 5) + keyword + " " * gap + "= " + value + " done"
        streamed, outs = _streamed([reply[i : i + 3] for i in range(0, len(reply), 3)])
        assert streamed == redact_text(reply)[0], (pad, gap)
        assert value not in streamed


def test_a_short_keyword_line_still_goes_out_at_once():
    masker = StreamMasker()
    assert masker.feed("password = ") == "password = "
    assert masker.feed("and " + " " * 40) == "and " + " " * 40
