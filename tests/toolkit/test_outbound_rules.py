"""The one outbound rule, table by table (issue 50 item 3): embedded IPv4, `inet_aton` host forms,
Unicode dots, and the path a callback is compared by. No test here opens a connection."""

from __future__ import annotations

import pytest

from toolkit import outbound
from toolkit.outbound import Policy, Refused


@pytest.mark.parametrize("address, reason", [
    # IPv4 written as IPv6, in every form that delivers to the IPv4 address it carries
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:0:7f00:1", "loopback (IPv4-translated)"),
    ("::7f00:1", "loopback (IPv4-compatible)"),
    ("2002:7f00:1::1", "loopback (6to4)"),
    ("2002:a9fe:a9fe::1", "cloud metadata (6to4)"),
    ("2002:a00:1::1", "private (6to4)"),
    ("2002:a9fe:1::", "link-local (6to4)"),
    ("2002:6440:1::1", "carrier-grade NAT (6to4)"),
    ("64:ff9b::7f00:1", "loopback (NAT64)"),
    ("64:ff9b::a9fe:a9fe", "cloud metadata (NAT64)"),
    ("64:ff9b::c0a8:101", "private (NAT64)"),
    ("2001:0:5ef5:79fd:0:0:80ff:fffe", "loopback (Teredo)"),  # client 127.0.0.1, obfuscated
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private (Teredo)"),  # client 10.0.0.1
    # IPv4 written the ways inet_aton (curl, git, browsers) reads it
    ("2130706433", "loopback"), ("0x7f000001", "loopback"), ("0177.0.0.1", "loopback"), ("127.1", "loopback"),
    ("0xa9fea9fe", "cloud metadata"), ("0xa9.0xfe.0xa9.0xfe", "cloud metadata"), ("10.1", "private"),
    ("0", "unspecified"),
    # the plain ones still hold
    ("127.0.0.1", "loopback"), ("169.254.169.254", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"),
    ("100.64.0.1", "carrier-grade NAT"), ("fe80::1", "link-local"), ("fc00::1", "private"), ("ff02::1", "multicast"),
])
def test_every_refused_ipv4_range_is_refused_in_every_written_form(address, reason):
    assert outbound.refused_reason(address) == reason


@pytest.mark.parametrize("address", ["8.8.8.8", "2002:808:808::1", "2606:4700:4700::1111", "134744072"])
def test_public_addresses_in_any_form_are_reachable(address):
    assert outbound.refused_reason(address) == ""


@pytest.mark.parametrize("host, refusal", [
    ("localhost.", "localhost is a loopback name"), ("LOCALHOST", "localhost is a loopback name"),
    ("api.localhost.", "api.localhost is a loopback name"),
    ("127\u30020\u30020\u30021", "127.0.0.1 is a loopback address"),  # ideographic full stops
    ("127\uff0e0\uff0e0\uff0e1", "127.0.0.1 is a loopback address"),  # full-width full stops
    ("2130706433", "2130706433 is a loopback address"), ("0xa9fea9fe", "0xa9fea9fe is a cloud metadata address"),
    ("[2002:7f00:1::1]", "2002:7f00:1::1 is a loopback (6to4) address"),
    ("[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe is a cloud metadata (NAT64) address"),
])
def test_a_written_host_is_judged_as_it_will_be_looked_up(host, refusal):
    with pytest.raises(Refused) as caught:
        outbound.check_host(host)
    assert str(caught.value) == refusal
    with pytest.raises(Refused, match="address|name"):
        Policy().check_url(f"http://{host}/x")


def test_an_allow_list_entry_still_admits_its_host_in_any_written_form():
    policy = Policy(allow_hosts=("127.0.0.1", "localhost"))
    assert outbound.check_host("localhost.", policy=policy) == "localhost"
    assert outbound.check_host("2130706433", policy=policy) == "2130706433"  # the same address as the entry


def test_a_name_answering_a_6to4_loopback_is_refused_before_any_connection():
    policy = Policy(resolver=lambda host, port: ["2002:7f00:1::1"])
    with pytest.raises(Refused, match="resolves to 2002:7f00:1::1, a loopback \\(6to4\\) address"):
        policy.address("inward.test", 443)


def test_a_legacy_literal_is_connected_to_as_the_address_it_denotes():
    assert Policy(allow_hosts=("2130706433",)).address("2130706433", 80) == "127.0.0.1"


@pytest.mark.parametrize("path, reason", [
    ("/hooks/..;/..;/evil", "a dot segment"),
    ("/hooks/.;x/evil", "a dot segment"),
    ("/hooks/%2e%2e/evil", "a dot segment"),
    ("/hooks/%252e%252e/evil", "a dot segment"),  # double-encoded
    ("/hooks/%25252e%25252e/evil", "a dot segment"),  # triple-encoded
    ("/hooks/%2525252525252e/evil", "encoded too many times"),
    ("/hooks/%C0%AE%C0%AE/evil", "not valid UTF-8"),  # overlong `.`
    ("/hooks/%E0%80%AE/evil", "not valid UTF-8"),
    ("/hooks/\uff0e\uff0e/evil", "a dot segment"),  # full-width dots
    ("/hooks/%EF%BC%8E%EF%BC%8E/evil", "a dot segment"),  # the same, percent-encoded
    ("/hooks/\u3002\u3002/evil", "a dot segment"),
    ("/hooks\uff0f..\uff0fevil", "a dot segment"),  # full-width solidus
    ("/hooks//evil.com", "an empty segment"),
    ("//evil.com/hooks", "an empty segment"),
    ("/hooks/%2F%2Fevil.com", "an encoded slash"),
    ("/hooks/%252f..", "an encoded slash"),
    ("/hooks/..%5cevil", "an encoded slash or a backslash"),
    ("/hooks/%00", "a control character"),
])
def test_a_path_is_refused_when_its_normal_form_could_leave_a_prefix(path, reason):
    with pytest.raises(Refused, match=reason):
        outbound.normalised_path(path)


@pytest.mark.parametrize("path, normal", [
    ("/hooks", "/hooks"), ("/hooks/", "/hooks/"), ("/hooks/run-7", "/hooks/run-7"), ("/hooks/a;v=1/b", "/hooks/a/b"),
    ("/hooks/%41", "/hooks/A"), ("/hooks/caf%C3%A9", "/hooks/café"), ("", "/"),
])
def test_a_plain_path_normalises_to_what_a_server_reads(path, normal):
    assert outbound.normalised_path(path) == normal


@pytest.mark.parametrize("path, prefix, under", [
    ("/hooks", "/hooks", True), ("/hooks/run-7", "/hooks", True), ("/hooks/run-7", "/hooks/", True),
    ("/hooks-evil", "/hooks", False), ("/hook", "/hooks", False), ("/anything", "/", True),
])
def test_a_prefix_admits_paths_at_a_segment_boundary(path, prefix, under):
    assert outbound.path_under(path, prefix) is under
