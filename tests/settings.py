"""Test settings: the site's settings with a fresh data directory per test run.

Variables a developer may have exported (inference, Redis, Postgres mode) are cleared so the
suite starts from the embedded defaults; tests that need them set them explicitly.
"""

import os
import tempfile

for _name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL",
              "AGENTS_ORG_DATABASE", "AGENTS_GATEWAY_JWT_KEY", "CLOUD_AGENT_FEE_CENTS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
    os.environ.pop(_name, None)
# Always a fresh directory: an exported AGENTS_DATA_DIR (a real deployment's) must never receive
# test orgs, and fixed test slugs must not meet a previous run's files.
os.environ["AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="agents-test-")

from agents_site.settings import *  # noqa: E402,F401,F403

# Fast password hashing: test users are created per test.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
