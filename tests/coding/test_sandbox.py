"""The bubblewrap sandbox confines a command: no network, only the working copy writable,
no server environment, no org databases, killed at its limits (issue 14 item 4)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from coding.sandbox import Limits, SandboxUnavailable, get_sandbox, require_sandbox

pytestmark = pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed (scripts/test-prereqs.sh)")


@pytest.fixture
def box():
    return get_sandbox()


@pytest.fixture
def work(tmp_path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def limits(**kw) -> Limits:
    return Limits(**{"timeout_seconds": 20, "cpu_seconds": 20, "memory_mb": 512, "output_bytes": 64 * 1024, **kw})


def test_command_writes_the_working_copy(box, work):
    result = box.run("echo hello > out.txt && cat out.txt && pwd", workdir=work, limits=limits())
    assert result.exit_code == 0
    assert result.output.split() == ["hello", "/workspace"]
    assert (work / "out.txt").read_text() == "hello\n"


def test_command_cannot_reach_the_network(box, work):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        script = f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), timeout=3)\n print('CONNECTED')\nexcept OSError as e:\n print('REFUSED', e)\n"
        (work / "probe.py").write_text(script)
        result = box.run("python3 probe.py; cat /proc/net/route | wc -l", workdir=work, limits=limits())
    finally:
        listener.close()
    assert "CONNECTED" not in result.output
    assert "REFUSED" in result.output


def test_command_cannot_write_outside_the_working_copy(box, work, tmp_path):
    outside = tmp_path / "outside.txt"
    result = box.run(
        f"echo x > /usr/evil; echo x > /etc/evil; echo x > {outside}; echo x > /tmp/scratch && echo tmp-ok",
        workdir=work, limits=limits(),
    )
    assert "tmp-ok" in result.output  # a private /tmp exists
    assert not Path("/usr/evil").exists() and not Path("/etc/evil").exists()
    assert not outside.exists()
    assert not Path("/tmp/scratch").exists()  # the sandbox's /tmp is not the host's


def test_command_cannot_read_the_server_environment(box, work, monkeypatch):
    monkeypatch.setenv("AGENTS_SANDBOX_PROBE_SECRET", "s3cr3t-value-do-not-leak")
    result = box.run("env; cat /proc/self/environ; cat /proc/1/environ", workdir=work, limits=limits())
    assert "s3cr3t-value-do-not-leak" not in result.output
    assert "DJANGO_SETTINGS_MODULE" not in result.output
    assert "HOME=/tmp" in result.output


def test_command_cannot_see_the_org_databases(box, work, org_a, settings):
    data_dir = Path(settings.AGENTS_DATA_DIR)
    assert any(data_dir.rglob("agents.db"))  # the org store exists on the host
    command = f"ls {data_dir} && echo LISTED; find / -path /proc -prune -o -name 'agents.db' -print 2>/dev/null; echo END"
    result = box.run(command, workdir=work, limits=limits(timeout_seconds=120))  # a bound, generous under load
    assert "LISTED" not in result.output
    assert "agents.db" not in result.output
    assert result.output.strip().endswith("END")


def test_command_is_killed_at_its_time_limit(box, work):
    result = box.run("echo started; sleep 60 & sleep 60; echo never", workdir=work, limits=limits(timeout_seconds=1))
    assert result.timed_out is True
    assert result.exit_code is None
    assert "started" in result.output and "never" not in result.output
    assert "time limit" in result.for_model()


def test_output_beyond_the_limit_stops_the_command(box, work):
    result = box.run("yes x", workdir=work, limits=limits(output_bytes=1000))
    assert result.truncated is True
    assert len(result.output) == 1000


def test_cpu_limit_kills_a_spinning_command(box, work):
    result = box.run("python3 -c 'while True: pass'", workdir=work, limits=limits(cpu_seconds=1, timeout_seconds=30))
    assert result.timed_out is False
    assert result.exit_code != 0  # killed by the CPU limit (the shell reports 137), not a normal exit


def test_memory_limit_fails_a_large_allocation(box, work):
    result = box.run("python3 -c 'x = bytearray(600 * 1024 * 1024); print(\"ALLOCATED\")'", workdir=work, limits=limits(memory_mb=256))
    assert "ALLOCATED" not in result.output
    assert result.exit_code != 0


def test_no_sandbox_means_refusal_not_fallback(settings):
    settings.AGENTS_CODING_SANDBOX = "none"
    with pytest.raises(SandboxUnavailable) as caught:
        require_sandbox()
    assert caught.value.status == 503 and caught.value.code == "sandbox_unavailable"
