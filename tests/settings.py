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

# The PostgreSQL + Redis pass of `make test` (`AGENTS_TEST_STORES=postgres pytest -m both_stores`,
# see tests/conftest.py): the default database, every org database and the channel layer, cache
# and task broker on the servers of the scale-out recipe. Names are this process's own (one per
# xdist worker, and a child daphne inherits them), so concurrent runs never share a row or key.
TEST_STORES = os.environ.get("AGENTS_TEST_STORES", "sqlite").strip().lower() or "sqlite"
if TEST_STORES == "postgres":
    _run = f"{os.environ.get('PYTEST_XDIST_WORKER', 'gw')}_{os.getpid()}"
    os.environ["DATABASE_URL"] = os.environ.get("AGENTS_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    os.environ["REDIS_URL"] = os.environ.get("AGENTS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    os.environ["AGENTS_ORG_DATABASE"] = "postgres"
    os.environ["AGENTS_ORG_DATABASE_PREFIX"] = f"agt_{_run}_"
    # The production org pool size (4: a test's own thread keeps one connection of its org
    # open between requests, so 2 starved a long-poll into 503), a small default pool and a
    # small store cache: hundreds of test orgs never hold more than a few dozen of the
    # server's connections (each evicted org closes its pool; idle ones close after 60 s).
    os.environ["AGENTS_DB_POOL_MAX_SIZE"] = "4"
    os.environ["AGENTS_ORG_DB_POOL_MAX_SIZE"] = "4"
    os.environ["AGENTS_STORE_CACHE_SIZE"] = "8"
    # Commits do not wait for the WAL to reach the disk (libpq reads PGOPTIONS, so the servers the
    # tests start inherit it): a test never survives a crash of the PostgreSQL server, and each of
    # the pass's commits waited on an fsync (one both_stores file: 123-148 s → 112-127 s, load 12-20).
    os.environ.setdefault("PGOPTIONS", "-c synchronous_commit=off")

from agents_site.settings import *  # noqa: E402,F401,F403

if TEST_STORES == "postgres":
    DATABASES["default"]["TEST"] = {"NAME": f"agt_{_run}_default"}  # noqa: F405
    CACHES = {"default": {**CACHES["default"], "KEY_PREFIX": f"agt_{_run}"}}  # noqa: F405
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"agt_{_run}"  # noqa: F405
    Q_CLUSTER["name"] = f"agt_{_run}"  # noqa: F405

# Fast password hashing: test users are created per test.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
AGENTS_WEBHOOK_THREADS = 0  # webhook attempts inline in their task (tests opt in to threads)
AGENTS_WEBHOOK_FAST_RETRY_SECONDS = 0  # no in-process retry timers (tests drive the schedule)
# The test process imports `server.asgi` (the fast handler's tests): it must not freeze the
# test runner's heap mid-run. Servers the tests start use `agents_site.settings` (on by default).
AGENTS_GC_FREEZE = False
