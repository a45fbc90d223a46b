"""The identity OpenAPI document is exact: schemathesis drives every operation of a live daphne
and checks every answer (status declared, body matching its schema, error shape).

`--checks all` includes `positive_data_acceptance`: a schema-valid request must be accepted.
Values valid only against stored data or rules no JSON Schema keyword states (a new custom_id,
an admitted webhook address, real public keys) come from `contract_hooks.py` for generated
valid requests; the live server admits 127.0.0.1 as a webhook host.
"""

import os

import subprocess
import sys

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_identity_api_matches_its_openapi_document(org_a):
    from django.conf import settings

    from tests.support.live import LiveServer

    from tests.support.live import ROOT

    server = LiveServer({"AGENTS_IDENTITY_CREATE_RATE": "1000/min", "AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}).start(timeout=120)
    try:
        result = subprocess.run(
            [
                sys.executable, "-m", "schemathesis.cli", "run", f"{server.url}/v1/identity/openapi.json",
                "-H", f"Authorization: Bearer {org_a.key}",
                "--checks", "all", "--exclude-checks", "missing_required_header,ignored_auth,unsupported_method",
                "-w", "1", "--no-shrink", "--generation-allow-x00", "false",
                "--exclude-operation-id", "identity_inbox_stream",
                "-n", "15", "--seed", "20261201",
            ],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "SCHEMATHESIS_HOOKS": "tests.identity.contract_hooks", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
            cwd=str(settings.AGENTS_DATA_DIR),  # its cache directory goes there, not into the checkout
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
