"""The OpenAPI document of /v1/agents is the truth: schemathesis over a live server finds nothing.

A real daphne process serves the API, its inference gateway the loopback upstream of the tests
(tests/support/upstream.py), runs free (`CLOUD_AGENT_FEE_CENTS=0`): a generated run executes
against the loopback model. Fields whose validity depends on stored data or on rules no JSON
Schema keyword states get valid values in generated valid requests from contract_hooks.py. schemathesis reads the
served document and sends every operation generated requests — valid and invalid, then
stateful sequences following the links it infers — with every check schemathesis has (all are
on by default; `--checks all` is not given: a check named on the command line overrides the
per-operation settings of schemathesis.toml, and it would also turn on `max_response_time`, a
10 s timing limit, which has no place in a pass/fail test): a 5xx, an answer whose
status, headers or body the document does not declare, a valid request refused or an invalid
one accepted is a failure, and so is any failure of this test.

Excluded operations, each with its reason (each keeps its own tests):
- `GET /v1/agents/sessions/stream`: a Server-Sent Events stream never ends
  (tests/sessions/test_stream.py);
- `POST /v1/agents/targets/{target_id}/claim`: a long-poll that waits up to
  `AGENTS_CLAIM_WAIT_SECONDS` for work (tests/targets/test_claim.py, test_longpoll.py);
- `POST /v1/agents/coding`: starts real work — a clone, sandboxed commands, a push
  (tests/coding).

One check is off for two operations (tests/agents_site/schemathesis.toml says why):
`ensure_resource_availability` for `POST /v1/agents/sessions/{id}/approve` and `/deny`, whose
documented 404 for an invented `toolCallId` the stateful phase would read as the session gone.

`POST /v1/agents/chat` is fuzzed (a round runs against the loopback model), but its streaming
variant is not: generated valid bodies drop `stream` (an event stream has no schema to check
against; tests/chat/test_stream.py holds it), and `agent` (it must name a stored agent).

The seed is fixed so `make test` is repeatable; `AGENTS_CONTRACT_SEED=random` (or a number)
explores other cases, `AGENTS_CONTRACT_EXAMPLES` sets the examples per operation.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import httpx
import pytest

from tests.support.live import ROOT, LiveServer

pytestmark = pytest.mark.django_db(transaction=True)

EXCLUDED = {
    "GET /v1/agents/sessions/stream": "a Server-Sent Events stream never ends",
    "POST /v1/agents/targets/{target_id}/claim": "a long-poll that waits for work",
    "POST /v1/agents/coding": "starts a coding run: clone, sandboxed commands, push (tests/coding)",
}
SEED = "20261201"
CONFIG = ROOT / "tests" / "agents_site" / "schemathesis.toml"
# The one check left out everywhere: schemathesis demands 401 for a missing `Authorization`; this
# API's contract (spec 003) answers 403 for every call without a principal.
# test_every_operation_refuses_a_call_without_a_credential_with_403 holds that instead.
EXCLUDED_CHECKS = ("missing_required_header",)
EXAMPLES = "20"


def _schemathesis(server: LiveServer, key: str, report_dir) -> subprocess.CompletedProcess:
    seed = os.environ.get("AGENTS_CONTRACT_SEED", SEED)
    args = [
        # Per-operation settings, each with its reason, live in schemathesis.toml beside this file.
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG),
        "run", f"{server.url}/v1/agents/openapi.json",
        "--header", f"Authorization: Bearer {key}",
        "--exclude-checks", ",".join(EXCLUDED_CHECKS),
        "--max-examples", os.environ.get("AGENTS_CONTRACT_EXAMPLES", EXAMPLES),
        "--workers", "1",
        "--request-timeout", "30",
        "--no-shrink",
        # The API refuses U+0000 in every text field (PostgreSQL text cannot hold it), as its
        # description says; generated valid strings therefore carry none.
        "--generation-allow-x00", "false",
        "--report", "junit", "--report-dir", str(report_dir),
    ]
    if seed != "random":
        args += ["--seed", seed]
    for operation in EXCLUDED:
        method, path = operation.split(" ", 1)
        args += ["--exclude-operation-id", _operation_id(server, method, path)]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.agents_site.contract_hooks", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _operation_id(server: LiveServer, method: str, path: str) -> str:
    document = httpx.get(f"{server.url}/v1/agents/openapi.json", timeout=10).json()
    return document["paths"][path][method.lower()]["operationId"]


@pytest.fixture
def live(upstream):
    """A daphne process whose inference gateway is the loopback upstream, runs free of charge.

    A run then executes against the loopback model (a quick canned answer); no worker runs, so
    a background run stays queued. Nothing leaves the machine.
    """
    env = {"INFERENCE_BASE_URL": upstream.base_url, "AGENTS_DEFAULT_MODEL": "test-model", "CLOUD_AGENT_FEE_CENTS": "0",
           # Generated requests read share links far faster than a person: the rate limit has its own test.
           "AGENTS_SHARE_READ_RATE": "100000/min"}
    server = LiveServer(env).start(timeout=120)  # a loaded machine may take a while to import Django
    yield server
    server.stop()


def test_schemathesis_finds_nothing_against_a_live_server(make_org, live, tmp_path):
    org = make_org("contract")

    result = _schemathesis(live, org.key, tmp_path / "report")

    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-20000:]
    assert not re.search(r"\d+ (failures?|errors?)\b", output.splitlines()[-1]), output[-5000:]


def test_every_operation_refuses_a_call_without_a_credential_with_403(live):
    """What `missing_required_header` would check, with this API's status: 403, error shape."""
    document = httpx.get(f"{live.url}/v1/agents/openapi.json", timeout=10).json()
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    secured = [(m.upper(), p) for p, item in document["paths"].items() for m, op in item.items() if op.get("security")]
    assert len(secured) >= 30
    for method, path in secured:
        url = live.url + path.replace("{run_id}", "run_" + "0" * 32).replace("{", "x").replace("}", "")
        for headers in ({}, {"Authorization": "Bearer ak_" + "0" * 48}):
            response = httpx.request(method, url, headers=headers, timeout=10)
            assert response.status_code == 403, (method, path, headers, response.text)
            assert response.json()["code"] == "forbidden"


def test_the_checks_are_all_but_the_excluded_and_the_config_turns_one_off_for_approve_and_deny_only(client):
    """The checks as the command line above sets them, with schemathesis.toml: every built-in check
    on every operation and phase but `missing_required_header` (and `max_response_time`, off
    without a limit), and `ensure_resource_availability` off for approve/deny only — a served path
    renamed, or a check named on the command line (which overrides the file), would undo it."""
    import schemathesis
    from schemathesis.config import SchemathesisConfig
    from schemathesis.config._checks import _BUILTIN_CHECK_NAMES

    document = client.get("/v1/agents/openapi.json").json()
    config = SchemathesisConfig.from_path(str(CONFIG))
    config.projects.override.checks.update(included_check_names=None, excluded_check_names=list(EXCLUDED_CHECKS))
    schema = schemathesis.openapi.from_dict(document)
    schema.config = config.projects.get(document)
    off = set()
    for operation in (result.ok() for result in schema.get_all_operations()):
        for phase in ("examples", "coverage", "fuzzing", "stateful"):
            checks = schema.config.checks_config_for(operation=operation, phase=phase)
            off |= {(operation.label, name) for name in _BUILTIN_CHECK_NAMES if not checks.get_by_name(name=name).enabled}

    everywhere = {name for _, name in off if sum(1 for _, n in off if n == name) == len({label for label, _ in off})}
    assert everywhere == {"missing_required_header", "max_response_time"}
    assert {(label, name) for label, name in off if name not in everywhere} == {
        ("POST /v1/agents/sessions/{id}/approve", "ensure_resource_availability"),
        ("POST /v1/agents/sessions/{id}/deny", "ensure_resource_availability"),
    }
