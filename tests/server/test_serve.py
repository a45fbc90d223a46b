"""`make run` / `make demo` (`manage.py serve`): the port it says is the port it serves, bad ports stop it in one sentence."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading

import httpx
import pytest
from django.core.management.base import CommandError
from honcho.environ import expand_processes, parse_procfile

from server.management.commands.serve import DEFAULT_PORT, honcho_command, port_from_env
from tests.support.live import ROOT, free_port


def web_port(env: dict) -> str:
    """Return the PORT honcho gives the web process for `make run`'s command line under `env`."""
    command = honcho_command(venv_bin=ROOT / ".venv" / "bin", port=port_from_env(env), demo=True, backup=False)
    base = int(command[command.index("-p") + 1])
    procfile = parse_procfile((ROOT / "Procfile").read_text())
    processes = {name: procfile.processes[name] for name in command[command.index("-p") + 2 :]}
    expanded = expand_processes(processes, env={k: v for k, v in env.items() if k != "PORT"}, port=base)
    return next(p.env["PORT"] for p in expanded if p.name == "web.1")


def test_with_no_port_in_the_environment_the_web_process_gets_8000():
    assert DEFAULT_PORT == 8000
    assert web_port({}) == "8000"


def test_a_port_in_the_environment_is_the_web_processes_port():
    assert web_port({"PORT": "8123"}) == "8123"


@pytest.mark.parametrize("raw", ["80a", "0", "65536", "-1", "8000.5"])
def test_a_port_that_is_not_a_number_is_refused_naming_the_variable(raw):
    with pytest.raises(CommandError, match=rf"^PORT={re.escape(raw)} is not a port number"):
        port_from_env({"PORT": raw})


def serve(env_extra: dict, tmp_path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTS_", "INFERENCE_", "DATABASE_URL", "REDIS_URL", "DJANGO_", "PYTEST_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "agents_site.settings", "AGENTS_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1", **env_extra})
    return subprocess.Popen([sys.executable, "manage.py", "serve", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_a_taken_port_stops_it_in_one_sentence(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = serve({"PORT": str(port)}, tmp_path)
        output, _ = process.communicate(timeout=120)
    assert process.returncode == 1
    assert output.strip().startswith(f"CommandError: Port {port} (PORT) is taken on 127.0.0.1")
    assert "Traceback" not in output
    assert not (tmp_path / "data" / "default.db").exists()  # it stopped before preparing anything


def test_not_a_number_stops_it_before_anything_is_prepared(tmp_path):
    process = serve({"PORT": "eighty"}, tmp_path)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 1
    assert output.strip() == ("CommandError: PORT=eighty is not a port number: set PORT to a number from 1 to 65535 "
                              "(unset, make run serves on 8000).")


def test_make_demo_serves_where_its_banner_says_and_runs_on_the_demo_gateway(tmp_path):
    """`make demo`'s command line on a fresh data directory: the banner's address answers, a run echoes, Ctrl-C stops all."""
    port = free_port()
    process = serve({"PORT": str(port), "AGENTS_DEMO_GATEWAY_PORT": str(free_port())}, tmp_path, "--demo")
    lines: list[str] = []
    banner = threading.Event()

    def read() -> None:
        for line in process.stdout:
            lines.append(line)
            if "Serving on http://" in line:
                banner.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert banner.wait(180), "".join(lines)
        text = "".join(lines)
        address = re.search(r"Serving on (http://\S+)/", text).group(1)
        assert address == f"http://127.0.0.1:{port}"
        assert text.index("make run: migrating the database") < text.index("Serving on")
        key = re.search(r"API key:\s+(ak_\w+)", text).group(1)
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=address, headers=headers, timeout=60) as api:
            created = api.post("/v1/agents", json={"name": "writer", "tools": ["calculator"]})
            assert created.status_code == 201, created.text
            assert created.json()["model"] == "demo"
            echoed = api.post("/v1/agents/writer/run", json={"input": "Say hi"})
            assert echoed.status_code == 200, echoed.text
            assert (echoed.json()["status"], echoed.json()["output"]) == ("ok", "You said: Say hi")
            tool = api.post("/v1/agents/writer/run", json={"input": '/tool calculator {"expression":"6*7"}'})
            assert tool.json()["output"] == "The tool calculator answered: 42"
            assert tool.json()["toolCalls"] == 1
            ledger = api.get("/v1/agents/billing").json()
            assert ledger["balanceCents"] == 10_000 - 2 * ledger["feeCents"]  # demo runs are billed like any run
        password = re.search(r"login: admin / (\S+)", text).group(1)
        with httpx.Client(base_url=address, timeout=60, follow_redirects=True) as browser:
            form = browser.get("/console/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
            dashboard = browser.post("/console/login/", data={"username": "admin", "password": password, "csrfmiddlewaretoken": token})
            assert dashboard.status_code == 200
            assert "demo gateway · replies are echoes" in dashboard.text  # the console says it is not a model
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        reader.join(timeout=10)
    assert "make run: stopped." in "".join(lines)
