"""Sanitizing of spec, metrics and reports (reference §1.7, §2.4)."""

from __future__ import annotations

import pytest

from agents_site.errors import InvalidRequest
from targets.sanitize import clean_metrics, clean_report, clean_spec


def test_strings_are_trimmed_and_cut_at_64_characters():
    assert clean_spec({"os": "  linux  ", "arch": "a" * 80}) == {"os": "linux", "arch": "a" * 64}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -3, "12", True, None])
def test_odd_numbers_become_zero_and_are_omitted(value):
    assert clean_metrics({"load1": value}) == {}


def test_numbers_are_clamped_to_their_range():
    assert clean_spec({"cpus": 10_000, "memory": 2**80}) == {"cpus": 8192, "memory": 2**53 - 1}
    assert clean_metrics({"gpuUtil": 3.5, "load5": 0.5}) == {"gpuUtil": 1.0, "load5": 0.5}


def test_empty_gpus_are_dropped_and_33_are_refused():
    assert clean_spec({"gpus": [{}, {"model": " H100 ", "memory": 80}]}) == {"gpus": [{"model": "H100", "memory": 80}]}
    with pytest.raises(InvalidRequest, match="too many gpus"):
        clean_spec({"gpus": [{"model": "x"}] * 33})


def test_an_all_zero_spec_or_metrics_is_empty_and_the_clients_at_is_ignored():
    assert clean_spec({"os": "", "cpus": 0, "gpus": []}) == {}
    assert clean_metrics({"load1": 0, "at": "2001-01-01T00:00:00Z"}) == {}


def test_a_report_is_clamped_and_a_failure_always_has_a_reason():
    report = clean_report({"ok": False, "output": "o" * (600 * 1024), "toolCalls": 2**40}, ok_word="ok", error_word="error")
    assert report["status"] == "error" and report["error"]
    assert len(report["output"].encode()) == 512 * 1024 and report["toolCalls"] == 2**31 - 1
    assert clean_report({"status": "ok"}, ok_word="ok", error_word="error")["status"] == "ok"
    assert clean_report({"status": "weird", "ok": True}, ok_word="ok", error_word="error")["status"] == "error"


def test_an_integer_too_large_for_a_float_is_clamped_not_a_500(org_a):
    """A JSON integer past 1e308 cannot become a float; it is clamped to the range's top."""
    from targets.models import Target

    assert clean_metrics({"load1": 10**400}) == {"load1": 1_000_000.0}
    assert clean_spec({"memory": 10**400}) == {"memory": 2**53 - 1}
    r = org_a.client.post("/v1/agents/targets", {"label": "big", "host": "big"}, content_type="application/json")
    target_id = r.json()["id"]
    r = org_a.client.patch(f"/v1/agents/targets/{target_id}", '{"metrics": {"load1": 1' + "0" * 400 + "}}",
                           content_type="application/json")
    assert r.status_code == 200, r.content
    assert r.json()["metrics"]["load1"] == 1_000_000.0
    with org_a.context():
        assert Target.objects.get(pk=target_id).metrics["load1"] == r.json()["metrics"]["load1"]


def test_a_reports_stopped_command_is_clamped_and_masked_and_absent_when_not_sent():
    """Issue 25 item 2: a routed run's killed command travels in the report and is stored masked."""
    secret = "AKIA" + "QWERTYUIOPASDFGH"
    report = clean_report({"status": "error", "error": "stopped: enough", "finishReason": "stopped",
                           "stoppedCommand": {"name": "shell", "command": f"echo {secret}", "output": "o" * 5000, "x": 1}},
                          ok_word="ok", error_word="error")
    stopped = report["stoppedCommand"]
    assert set(stopped) == {"name", "command", "output"} and stopped["name"] == "shell"
    assert secret not in stopped["command"] and stopped["command"].startswith("echo [redacted:aws-access-key-id:")
    assert len(stopped["output"].encode()) == 4 * 1024
    assert "stoppedCommand" not in clean_report({"status": "error"}, ok_word="ok", error_word="error")
    assert "stoppedCommand" not in clean_report({"status": "error", "stoppedCommand": "rm -rf /"}, ok_word="ok", error_word="error")
