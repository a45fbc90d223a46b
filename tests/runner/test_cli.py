"""The runner's command line: flags, their environment fallbacks, and refusals (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner import cli
from runner.daemon import Config, Daemon


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("AGENTS_SERVER", "AGENTS_API_KEY", "RUNNER_LABEL", "RUNNER_ALLOW_SHELL", "AGENTS_TOOL_HTTP_ALLOW",
                 "RUNNER_ALLOW_UNSANDBOXED", "RUNNER_CODING_WORK_DIR", "RUNNER_MODEL", "INFERENCE_BASE_URL", "INFERENCE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_flags_make_the_config(tmp_path):
    config = cli.parse(["--server", "http://127.0.0.1:9/", "--api-key", "ak_x", "--label", "box", "--kind", "gpu",
                        "--allow-shell", str(tmp_path), "--allow-http", "api.example.com, *.corp.test", "--key-dir", str(tmp_path / "k"),
                        "--heartbeat", "0.01", "--stop-grace", "-3", "--model", " m1 ", "--coding-work-dir", str(tmp_path / "w"),
                        "--allow-unsandboxed-commands"])
    assert (config.server, config.api_key, config.label, config.kind) == ("http://127.0.0.1:9", "ak_x", "box", "gpu")
    assert config.shell_root == tmp_path.resolve() and config.key_dir == tmp_path / "k"
    assert config.http_allow == ("api.example.com", "*.corp.test")
    assert (config.heartbeat_seconds, config.stop_grace, config.model_override) == (0.2, 0.0, "m1")
    assert config.allow_unsandboxed is True and config.coding_work_dir == str(tmp_path / "w")


def test_backoff_max_caps_the_pause_between_retries():
    default = cli.parse(["--server", "http://x", "--api-key", "k"])
    assert (default.backoff_initial, default.backoff_max) == (1.0, 30.0)
    short = cli.parse(["--server", "http://x", "--api-key", "k", "--backoff-max", "0.5"])
    assert (short.backoff_initial, short.backoff_max) == (0.5, 0.5)
    waits = Daemon(short)._retrying().wait
    assert all(waits(_State(n)) <= 0.5 for n in range(1, 12))


class _State:
    """The one field tenacity's wait reads from a retry state."""

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number


def test_the_environment_stands_in_for_flags(monkeypatch, tmp_path):
    monkeypatch.setenv("AGENTS_SERVER", "http://127.0.0.1:9")
    monkeypatch.setenv("AGENTS_API_KEY", "ak_env")
    monkeypatch.setenv("AGENTS_TOOL_HTTP_ALLOW", "docs.example.com")
    monkeypatch.setenv("RUNNER_ALLOW_UNSANDBOXED", "yes")
    monkeypatch.setenv("INFERENCE_BASE_URL", " http://127.0.0.1:8/v1 ")
    config = cli.parse([])
    assert (config.server, config.api_key, config.http_allow) == ("http://127.0.0.1:9", "ak_env", ("docs.example.com",))
    assert config.allow_unsandboxed is True and config.inference_base_url == "http://127.0.0.1:8/v1"
    assert config.label and config.shell_root is None and config.key_dir is None


@pytest.mark.parametrize("argv", [[], ["--server", "http://x"], ["--server", "http://x", "--api-key", "k", "--kind", "toaster"]])
def test_missing_or_bad_flags_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        cli.parse(argv)
    assert caught.value.code == 2


def test_a_shell_root_that_is_not_a_directory_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        cli.parse(["--server", "http://x", "--api-key", "k", "--allow-shell", str(tmp_path / "missing")])


def test_the_daemon_offers_the_tools_its_flags_allow(tmp_path):
    bare = Daemon(Config(server="http://127.0.0.1:9", api_key="k", label="l"))
    assert sorted(bare.tools) == ["calculator", "current_time"]
    full = Daemon(Config(server="http://127.0.0.1:9", api_key="k", label="l", shell_root=Path(tmp_path), http_allow=("example.com",)))
    assert sorted(full.tools) == ["calculator", "current_time", "http_get", "shell"]


def test_main_reports_an_os_error_as_fatal_and_an_interrupt_as_a_clean_stop(monkeypatch):
    class Failing:
        error: BaseException = OSError("address in use")

        def __init__(self, config):
            pass

        def run(self):
            raise self.error

    monkeypatch.setattr(cli, "Daemon", Failing)
    assert cli.main(["--server", "http://x", "--api-key", "k"]) == 2
    Failing.error = KeyboardInterrupt()
    assert cli.main(["--server", "http://x", "--api-key", "k"]) == 0
