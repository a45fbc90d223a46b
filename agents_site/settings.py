"""Settings for the Agents site, read from the environment.

Every integration has a default that works with no environment at all (SQLite files, the
in-memory channel layer, django-q2's ORM broker) and switches on by its variable
(`DATABASE_URL`, `AGENTS_ORG_DATABASE`, `REDIS_URL`, `OTEL_EXPORTER_OTLP_ENDPOINT`).
docs/operations/environment.md lists every variable read here (scripts/docs/environment.py holds
the words; tests/docs/test_environment.py fails on a variable read here that the table lacks).
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_int(name: str, default: int) -> int:
    """Return env `name` as an int, or `default` when unset, blank or unparseable."""
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        return default


def _env_bool(name: str, default: bool = False) -> bool:
    """Return env `name` as a bool (`1`, `true`, `yes`, `on` are true)."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    return raw in {"1", "true", "yes", "on"}


def _env_float(name: str, default: float) -> float:
    """Return env `name` as a float, or `default` when unset, blank or unparseable."""
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        return default


def _env_list(name: str) -> list[str]:
    """Return env `name` split on commas, trimmed, blanks dropped."""
    return [part.strip().lower() for part in os.environ.get(name, "").split(",") if part.strip()]


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-insecure-secret-key-change-me")
DEBUG = _env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h.strip()]

AGENTS_DATA_DIR = Path(os.environ.get("AGENTS_DATA_DIR", str(BASE_DIR / "data"))).resolve()
AGENTS_DATA_DIR.mkdir(parents=True, exist_ok=True)

# Backups (tenancy/backups, docs/guides/backups.md). SQLite mode: `manage.py replicate`
# runs Litestream for the default database and every org file, shipping WAL to this replica
# (a local directory, or any URL Litestream supports: s3://, gs://, abs://, sftp://, webdav://).
# PostgreSQL org mode: `backup_org_pg` writes `pg_dump --format=custom` files under it (a local
# directory). Unset: no replication, and the app checkpoints its own WAL as before.
AGENTS_BACKUP_URL = os.environ.get("AGENTS_BACKUP_URL", "").strip()
# How long a replica outlives its org (an org removed, or a replica retired by a restore), and
# how far back a restore can go (Litestream's snapshot retention), in days.
AGENTS_BACKUP_RETENTION_DAYS = max(1, _env_int("AGENTS_BACKUP_RETENTION_DAYS", 7))
# How long every single committed transaction stays restorable to the second (Litestream keeps
# its per-sync level-0 files this long; older moments restore at the compaction levels' 30 s /
# 5 min / 1 h steps), in hours.
AGENTS_BACKUP_EXACT_HOURS = max(1, _env_int("AGENTS_BACKUP_EXACT_HOURS", 24))
# How often `manage.py replicate` looks for new, removed and restored orgs (seconds).
AGENTS_BACKUP_POLL_SECONDS = max(0.2, _env_float("AGENTS_BACKUP_POLL_SECONDS", 2.0))
# With replication on, Litestream owns WAL checkpoints (it holds a read transaction and
# checkpoints at 1,000 pages); the app's automatic checkpoint then runs only past this many
# pages, a safety net for a stopped `replicate` (SQLite's own default, 1,000, without it).
AGENTS_SQLITE_AUTOCHECKPOINT_PAGES = 10_000 if AGENTS_BACKUP_URL else 1000


INSTALLED_APPS = [
    "daphne",
    "agents_site.apps.AgentsAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "ninja",
    "server",  # the composition root; before django_q: its `qcluster` command overrides django-q2's
    "agents_site",  # the ground: system checks, write_vocabulary_js
    "django_q",
    "tenancy",
    "billing",
    "runs",
    "agents",
    "sessions.apps.AgentSessionsConfig",
    "targets",
    "webhooks",
    "rest_framework",
    "drf_spectacular",
    "identity.apps.IdentityConfig",
    "coding",
    "chat",
    "openai_api",
    "a2a_server",
    "mcp_server",
    "responses_api",
    "guide.apps.GuideConfig",
    "console",
]

# The fast path (issue 27 item 3), each part switchable off to run on Django's stock code (a CI
# pass of `make test` runs the API tests that way; agents_site/django_private.py lists every
# private Django name the parts touch):
# AGENTS_FAST_HANDLER — the ASGI handler (server/asgi.py) and the inline middleware;
# AGENTS_POOLED_SQLITE — the SQLite engine that keeps idle connections (agents_site/db_backends).
AGENTS_FAST_HANDLER = _env_bool("AGENTS_FAST_HANDLER", True)
AGENTS_POOLED_SQLITE = _env_bool("AGENTS_POOLED_SQLITE", True)
# Freeze start-up's objects out of the garbage collector's full walks (server.heap): daphne
# and qcluster; a full collection otherwise walks ~225,000 start-up objects (122 ms, bench/heap.py).
AGENTS_GC_FREEZE = _env_bool("AGENTS_GC_FREEZE", True)
_MIDDLEWARE_HOME = "server.inline_middleware" if AGENTS_FAST_HANDLER else None
_STOCK_MIDDLEWARE = {
    "SecurityMiddleware": "django.middleware.security", "SessionMiddleware": "django.contrib.sessions.middleware",
    "CommonMiddleware": "django.middleware.common", "CsrfViewMiddleware": "django.middleware.csrf",
    "AuthenticationMiddleware": "django.contrib.auth.middleware", "MessageMiddleware": "django.contrib.messages.middleware",
    "XFrameOptionsMiddleware": "django.middleware.clickjacking",
}


def _stock(name: str) -> str:
    """Return the dotted path of Django's middleware `name`, inline on the loop when the fast handler is on."""
    return f"{_MIDDLEWARE_HOME or _STOCK_MIDDLEWARE[name]}.{name}"


# Django's stock middleware, run inline on the event loop under ASGI (server/inline_middleware.py):
# a request hops to a thread for the principal lookup and a sync view only.
MIDDLEWARE = [
    "server.middleware.api_error_shape",  # outermost: sees every error answered under /v1/
    "server.middleware.request_span",  # one server span per request, parent of a run's spans
    _stock("SecurityMiddleware"),
    "server.middleware.static_files",  # WhiteNoise, kept out of the way of async views
    _stock("SessionMiddleware"),
    _stock("CommonMiddleware"),
    _stock("CsrfViewMiddleware"),
    _stock("AuthenticationMiddleware"),
    _stock("MessageMiddleware"),
    _stock("XFrameOptionsMiddleware"),
    "tenancy.middleware.PrincipalMiddleware",
    "server.middleware.PermissionBoundary",  # the permission table's refusals, before any view
]

ROOT_URLCONF = "server.urls"
ASGI_APPLICATION = "server.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context.console_context",
            ],
        },
    },
]

# The default database holds users, orgs, API keys, the billing ledger and the task queue.
# Each org's agents, runs, sessions, events and targets live in the org's own store
# (tenancy/stores.py), never here.
_default_sqlite = AGENTS_DATA_DIR / "default.db"
if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=0)}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(_default_sqlite)}}
# SQLite files (the default database and every org store) use Django's engine with the idle
# connections kept for reuse in the process (agents_site/db_backends/sqlite3): a request still
# hands its connections back at its end, but reopening one costs nothing.
SQLITE_ENGINE = "agents_site.db_backends.sqlite3" if AGENTS_POOLED_SQLITE else "django.db.backends.sqlite3"
AGENTS_SQLITE_IDLE_PER_FILE = max(0, _env_int("AGENTS_SQLITE_IDLE_PER_FILE", 8))
AGENTS_SQLITE_IDLE_CONNECTIONS = max(0, _env_int("AGENTS_SQLITE_IDLE_CONNECTIONS", 64))
if DATABASES["default"]["ENGINE"] in ("django.db.backends.sqlite3", "agents_site.db_backends.sqlite3"):
    DATABASES["default"]["ENGINE"] = SQLITE_ENGINE
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                            f"PRAGMA wal_autocheckpoint={AGENTS_SQLITE_AUTOCHECKPOINT_PAGES};",
        }
    )
    DATABASES["default"]["TEST"] = {"NAME": str(AGENTS_DATA_DIR / "test-default.db")}
DATABASES["default"]["CONN_MAX_AGE"] = 0  # pooled or not, a request hands its connection back at its end

# PostgreSQL connections come from bounded per-process pools (Django's native pool, psycopg-pool):
# the default database's holds at most AGENTS_DB_POOL_MAX_SIZE, each org database's (PostgreSQL
# org mode, tenancy/backends/postgres.py) at most AGENTS_ORG_DB_POOL_MAX_SIZE. A request waits up
# to AGENTS_DB_POOL_TIMEOUT_SECONDS for a free connection; past that it is answered 503
# `store_busy`. docs/guides/scaling-out.md says how to size them against max_connections.
AGENTS_DB_POOL_MAX_SIZE = max(1, _env_int("AGENTS_DB_POOL_MAX_SIZE", 10))
AGENTS_ORG_DB_POOL_MAX_SIZE = max(1, _env_int("AGENTS_ORG_DB_POOL_MAX_SIZE", 4))
AGENTS_DB_POOL_TIMEOUT_SECONDS = max(0.1, _env_float("AGENTS_DB_POOL_TIMEOUT_SECONDS", 10.0))
if "postgresql" in DATABASES["default"]["ENGINE"]:
    # Django's engine whose module makes a forked process (django-q2's workers) forget the
    # pools and connections it inherited instead of sharing its parent's server sessions.
    DATABASES["default"]["ENGINE"] = "agents_site.db_backends.postgresql"
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, AGENTS_DB_POOL_MAX_SIZE),
        "max_size": AGENTS_DB_POOL_MAX_SIZE,
        "timeout": AGENTS_DB_POOL_TIMEOUT_SECONDS,
    }
DATABASE_ROUTERS = ["tenancy.db_router.OrgRouter"]

# `sqlite` (one file per org under AGENTS_DATA_DIR) or `postgres` (one database per org on
# DATABASE_URL's server).
AGENTS_ORG_DATABASE = os.environ.get("AGENTS_ORG_DATABASE", "sqlite").strip().lower() or "sqlite"
# PostgreSQL org mode: every org database's name starts with this (`{prefix}{slug}`), so several
# deployments (or test runs) can share one server.
AGENTS_ORG_DATABASE_PREFIX = os.environ.get("AGENTS_ORG_DATABASE_PREFIX", "agents_org_").strip() or "agents_org_"
# PostgreSQL org mode over several servers: comma-separated postgres:// URLs. A new org's database
# goes to one of them by a stable rule (rendezvous hash of the slug) and the choice is recorded
# in the default database (tenancy.OrgPlacement), so it never moves. Empty: DATABASE_URL's server.
AGENTS_ORG_DATABASE_SERVERS = [u.strip() for u in os.environ.get("AGENTS_ORG_DATABASE_SERVERS", "").split(",") if u.strip()]

# Checked where a password is chosen in the site (an org admin creating a user or setting a first
# password, Django's password forms); `manage.py` commands that take a password do not check it.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = AGENTS_DATA_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "/console/login/"
LOGIN_REDIRECT_URL = "/console/"
AGENTS_HTTPS = _env_bool("AGENTS_HTTPS", False)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SECURE = AGENTS_HTTPS
CSRF_COOKIE_SECURE = AGENTS_HTTPS
CSRF_COOKIE_SAMESITE = "Lax"

# Bodies bigger than this are refused with 413 before any parsing (bytes). The largest field
# the API accepts is a 128 KiB run input; JSON escaping can double it.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

REDIS_URL = os.environ.get("REDIS_URL", "").strip()


def redis_channel_layer(url: str, *, socket_timeout: float = 15, prefix: str = "") -> dict:
    """Return the `CHANNEL_LAYERS` entry of a channel layer on the Redis at `url` (the scale-out
    mode's; the tests build theirs with it too).

    `socket_timeout` (seconds) bounds each Redis read: redis-py's default, 5 s, equals
    channels-redis's 5 s blocking pop, so an idle receive would time out; reads get room past
    it. `prefix` (default channels-redis's "asgi") keeps one deployment's (or test run's) keys apart.
    """
    config = {"hosts": [{"address": url, "socket_timeout": socket_timeout}], "capacity": 1000, "expiry": 60}
    if prefix:
        config["prefix"] = prefix
    return {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}


if REDIS_URL:
    CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL)}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}}

# Live sessions (sessions app). The bus carries stream frames and steering commands:
# `channels` = the channel layer above (in-memory, or Redis when REDIS_URL is set: several
# processes then serve one stream), `local` = in-process only.
AGENTS_SESSION_BUS = os.environ.get("AGENTS_SESSION_BUS", "channels").strip().lower() or "channels"
# SSE: a `: ping` comment every N seconds; a subscriber N frames behind is dropped; with no
# live frame for N seconds the stream reads the store for events the bus did not bring.
AGENTS_SSE_PING_SECONDS = float(os.environ.get("AGENTS_SSE_PING_SECONDS", "25") or 25)
AGENTS_SSE_BUFFER_FRAMES = _env_int("AGENTS_SSE_BUFFER_FRAMES", 256)
AGENTS_SSE_CATCHUP_SECONDS = float(os.environ.get("AGENTS_SSE_CATCHUP_SECONDS", "5") or 5)
# A stream that wrote less than this many milliseconds ago gathers frames until it has passed
# (at most ~1000/this writes a second per stream; a quiet stream writes each frame at once). 0: off.
AGENTS_SSE_LINGER_MS = max(0.0, _env_float("AGENTS_SSE_LINGER_MS", 20.0))
# How long a steering command waits for the live executor's acknowledgement (seconds).
AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS = float(os.environ.get("AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS", "5") or 5)

Q_CLUSTER = {
    "name": "agents",
    "workers": _env_int("AGENTS_Q_WORKERS", 2),
    "timeout": _env_int("AGENTS_RUN_TIMEOUT_SECONDS", 600),
    "retry": _env_int("AGENTS_RUN_TIMEOUT_SECONDS", 600) + 60,
    "max_attempts": 1,
    "catch_up": False,
    "label": "Tasks",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
    # Seconds between polls of the ORM broker when the queue is empty (django-q2's default 0.2).
    Q_CLUSTER["poll"] = float(os.environ.get("AGENTS_Q_POLL_SECONDS", "0.2") or 0.2)

# Durable execution (agents/scheduling, runs/background.py, runs/recovery.py).
AGENTS_RUN_TIMEOUT_SECONDS = _env_int("AGENTS_RUN_TIMEOUT_SECONDS", 600)
# The whole deadline of one run's agent loop (every completion, retry and tool): past it the
# run ends `error` "the run ran out of time". Below the task queue's kill by default.
AGENTS_RUN_DEADLINE_SECONDS = max(_env_float("AGENTS_RUN_DEADLINE_SECONDS", float(max(AGENTS_RUN_TIMEOUT_SECONDS - 60, 30))), 1.0)
# How long a stopping worker (SIGTERM/Ctrl-C on qcluster) lets its run in flight finish before
# ending it "worker stopped" (seconds).
AGENTS_SHUTDOWN_GRACE_SECONDS = _env_float("AGENTS_SHUTDOWN_GRACE_SECONDS", 10.0)
# A missed slot younger than this (seconds) fires once when the scheduler next ticks; older
# ones are recorded as skipped.
AGENTS_CATCHUP_SECONDS = _env_int("AGENTS_CATCHUP_SECONDS", 300)
# A running background run whose worker has not renewed its lease for this long (seconds) is
# finished "worker lost"; workers renew every quarter of it.
AGENTS_RUN_LEASE_SECONDS = _env_int("AGENTS_RUN_LEASE_SECONDS", 60)
# A queued run no worker started within this many seconds ends "never started".
AGENTS_QUEUED_MAX_SECONDS = _env_int("AGENTS_QUEUED_MAX_SECONDS", 3600)
# The platform ends a live session idle this long, or open this long (seconds).
AGENTS_SESSION_IDLE_SECONDS = _env_int("AGENTS_SESSION_IDLE_SECONDS", 3600)
AGENTS_SESSION_MAX_SECONDS = _env_int("AGENTS_SESSION_MAX_SECONDS", 86400)

# Gateway-minted JWTs (HS256) are accepted only when this key is set.
AGENTS_GATEWAY_JWT_KEY = os.environ.get("AGENTS_GATEWAY_JWT_KEY", "")
# A process keeps an API key's validated principal this many seconds (keyed by the key's hash);
# a revocation reaches it through the revocation broadcast at once (tenancy.principal). 0: off.
AGENTS_API_KEY_CACHE_SECONDS = min(30.0, max(0.0, _env_float("AGENTS_API_KEY_CACHE_SECONDS", 5.0)))

# Inference (an OpenAI-compatible gateway).
INFERENCE_BASE_URL = os.environ.get("INFERENCE_BASE_URL", "").strip()
INFERENCE_API_KEY = os.environ.get("INFERENCE_API_KEY", "").strip()
# Timeouts that fit a model on a CPU (issue 31): connecting; the first token (the prompt is read
# first: slow on a CPU, so generous); the gap between two tokens once the reply streams. A
# run's whole deadline is AGENTS_RUN_DEADLINE_SECONDS (below the task queue's own kill).
# INFERENCE_TIMEOUT_SECONDS is the one timeout of earlier versions (each read from the gateway and
# one completion as a whole), still honoured so an upgraded deployment keeps the limit it set:
# the default of the first-token and between-tokens timeouts, and the longest one completion may
# take (within the run's deadline). Unset or 0 (the default): no such bound. Check agents.W001
# says it is deprecated.
INFERENCE_TIMEOUT_SECONDS = max(_env_float("INFERENCE_TIMEOUT_SECONDS", 0.0), 0.0) or None
INFERENCE_CONNECT_TIMEOUT_SECONDS = max(_env_float("INFERENCE_CONNECT_TIMEOUT_SECONDS", 10.0), 0.1)
INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS = max(_env_float("INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS", INFERENCE_TIMEOUT_SECONDS or 300.0), 0.1)
INFERENCE_TOKEN_TIMEOUT_SECONDS = max(_env_float("INFERENCE_TOKEN_TIMEOUT_SECONDS", INFERENCE_TIMEOUT_SECONDS or 60.0), 0.1)
AGENTS_DEFAULT_MODEL = os.environ.get("AGENTS_DEFAULT_MODEL", "gpt-4o-mini").strip()
# `make demo` sets it: the gateway is the loopback demo gateway (echoes, not a model); the console says so.
AGENTS_DEMO_GATEWAY = os.environ.get("AGENTS_DEMO_GATEWAY", "").strip().lower() in ("1", "true", "yes", "on")
AGENTS_FAILOVER_MODEL = os.environ.get("AGENTS_FAILOVER_MODEL", "").strip()
AGENTS_MODEL_CATALOG_TTL_SECONDS = _env_int("AGENTS_MODEL_CATALOG_TTL_SECONDS", 300)
# The most tokens one completion may write (`max_tokens` sent with every completion; an agent's
# own `maxTokens` is at most this), so no run writes forever.
AGENTS_MAX_OUTPUT_TOKENS = max(_env_int("AGENTS_MAX_OUTPUT_TOKENS", 4096), 1)
# What a completion asks for when its agent sets no maxTokens (at most the cap above): small
# enough that a CPU model answers within the timeouts.
AGENTS_DEFAULT_OUTPUT_TOKENS = max(_env_int("AGENTS_DEFAULT_OUTPUT_TOKENS", 1024), 1)
# The context window (tokens) assumed of a model whose agent sets no contextWindow and whose
# gateway states none: a prompt's oldest turns are dropped to fit it (agents/execution/context.py).
AGENTS_CONTEXT_WINDOW_TOKENS = max(_env_int("AGENTS_CONTEXT_WINDOW_TOKENS", 8192), 256)
# Every completion carries its run's id in the X-Agents-Run-Id header; set this to also send it
# in the body as metadata {agents_run_id, tags: ["agents_run:<id>"]} (LiteLLM keeps the tags in
# its spend logs; strict servers refuse unknown fields).
AGENTS_GATEWAY_RUN_METADATA = os.environ.get("AGENTS_GATEWAY_RUN_METADATA", "").strip().lower() in ("1", "true", "yes", "on")



# The run path (agents/execution). Retries: 429, 5xx, connection errors and empty choices are
# retried up to AGENTS_MODEL_ATTEMPTS times per model with equal-jitter backoff: before retry n
# the wait is d/2 + rand(0, d/2) with d = min(base * 2**(n-1), max) seconds.
AGENTS_MODEL_ATTEMPTS = _env_int("AGENTS_MODEL_ATTEMPTS", 3)
AGENTS_RETRY_BASE_SECONDS = _env_float("AGENTS_RETRY_BASE_SECONDS", 0.15)
AGENTS_RETRY_MAX_SECONDS = _env_float("AGENTS_RETRY_MAX_SECONDS", 2.0)
# The role the agent's instructions are sent as: `system` (default) or `user` (for gateways that
# drop system turns; reference §3.3).
AGENTS_INSTRUCTIONS_ROLE = os.environ.get("AGENTS_INSTRUCTIONS_ROLE", "system").strip().lower() or "system"
# Tools: rounds per run (the last offered no tools), seconds per tool call, nesting depth of
# agents called as tools, and the hosts `http_get` may fetch (empty: the tool is off).
AGENTS_TOOL_ROUNDS = _env_int("AGENTS_TOOL_ROUNDS", 8)
AGENTS_TOOL_CALL_TIMEOUT_SECONDS = _env_float("AGENTS_TOOL_CALL_TIMEOUT_SECONDS", 30.0)
AGENTS_MAX_AGENT_DEPTH = _env_int("AGENTS_MAX_AGENT_DEPTH", 3)
AGENTS_TOOL_HTTP_ALLOW = _env_list("AGENTS_TOOL_HTTP_ALLOW")
# stdio MCP servers start a command on this host: allowed only when every org admin is trusted
# with the host (single-tenant, self-hosted deployments).
AGENTS_MCP_STDIO = _env_bool("AGENTS_MCP_STDIO", False)
AGENTS_MCP_LIST_TTL_SECONDS = _env_int("AGENTS_MCP_LIST_TTL_SECONDS", 60)
# The MCP server (/v1/agents/mcp): a legacy session idle this long (no request in flight) is ended.
AGENTS_MCP_SESSION_IDLE_SECONDS = _env_int("AGENTS_MCP_SESSION_IDLE_SECONDS", 1800)
# Private, loopback, link-local, CGNAT and metadata hosts an HTTP MCP server URL may name anyway
# (an in-house server); every other such address is refused when the server is reached.
AGENTS_MCP_ALLOW_HOSTS = _env_list("AGENTS_MCP_ALLOW_HOSTS")
# Steering: how long a paused run is held before it ends as an error, and how often a held run
# re-checks its inbox (seconds). A pause never outlasts the run's deadline (the deadline counts
# paused time: past it the task queue would kill the run anyway), so the default is that deadline
# and a longer value is bounded by it (check agents.W002).
AGENTS_PAUSE_TIMEOUT_SECONDS = max(_env_float("AGENTS_PAUSE_TIMEOUT_SECONDS", AGENTS_RUN_DEADLINE_SECONDS), 0.1)
# How long a run waits for a person to answer its approval requests (issue 28) before it ends
# `error` "approval timed out", unbilled: the only clock of a `waiting` run and its session.
AGENTS_APPROVAL_TIMEOUT_SECONDS = _env_int("AGENTS_APPROVAL_TIMEOUT_SECONDS", 86400)
AGENTS_CONTROL_POLL_SECONDS = _env_float("AGENTS_CONTROL_POLL_SECONDS", 0.5)
# How long an Idempotency-Key on POST …/run is remembered (seconds).
AGENTS_IDEMPOTENCY_TTL_SECONDS = _env_int("AGENTS_IDEMPOTENCY_TTL_SECONDS", 24 * 3600)

# Traces: OTLP/HTTP export of the agent.run spans when the endpoint is set.
OTEL_EXPORTER_OTLP_ENDPOINT = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
OTEL_SERVICE_NAME = os.environ.get("OTEL_SERVICE_NAME", "agents").strip() or "agents"

# Agent definitions and billing. The fee is cents per successful run; 0 makes runs free and
# removes the balance gate; a negative value falls back to the default.
CLOUD_AGENT_MAX_LONG_RUNNING = _env_int("CLOUD_AGENT_MAX_LONG_RUNNING", 100)
CLOUD_AGENT_FEE_CENTS = _env_int("CLOUD_AGENT_FEE_CENTS", 100)
# Fees per kind of run (cents; unset = the run fee): a chat round or an OpenAI-compatible call
# need not cost what a whole run costs.
AGENTS_CHAT_FEE_CENTS = _env_int("AGENTS_CHAT_FEE_CENTS", -1)
AGENTS_OPENAI_FEE_CENTS = _env_int("AGENTS_OPENAI_FEE_CENTS", -1)
AGENTS_CODING_FEE_CENTS = _env_int("AGENTS_CODING_FEE_CENTS", -1)
# Conversations (POST /v1/agents/chat): how many characters of a stored thread a round sends back
# to the model before the caller's new messages (oldest turns dropped first; 0 sends none), and
# how long a round with `multitaskStrategy: enqueue` waits for the round in flight (seconds).
AGENTS_CHAT_HISTORY_CHARS = _env_int("AGENTS_CHAT_HISTORY_CHARS", 32_000)
AGENTS_CHAT_ENQUEUE_WAIT_SECONDS = _env_float("AGENTS_CHAT_ENQUEUE_WAIT_SECONDS", 120.0)
# Share links of conversations and sessions (issue 57): default and longest life in days, and how
# often one address may read shared pages (per process' cache, or Redis when REDIS_URL is set).
AGENTS_SHARE_DEFAULT_DAYS = max(1, _env_int("AGENTS_SHARE_DEFAULT_DAYS", 30))
AGENTS_SHARE_MAX_DAYS = max(1, _env_int("AGENTS_SHARE_MAX_DAYS", 365))
AGENTS_SHARE_READ_RATE = os.environ.get("AGENTS_SHARE_READ_RATE", "60/min").strip() or "60/min"

# Requests that mostly wait (the claim long-poll, the SSE stream) run their short sync steps on
# this many shared worker threads instead of one thread each (server/asgi.py).
AGENTS_SHARED_REQUEST_THREADS = max(1, _env_int("AGENTS_SHARED_REQUEST_THREADS", 4))
# Every other request runs its sync steps on a thread of its own, reused: this many idle
# request threads are kept per process for the next requests (server/asgi.py).
AGENTS_IDLE_REQUEST_THREADS = max(0, _env_int("AGENTS_IDLE_REQUEST_THREADS", 16))
# At most this many requests run their sync step at once (a burst of 500 waits on the loop for a
# thread instead of starting 500); a run's wait on its model is not a sync step (issue 26).
AGENTS_REQUEST_THREADS = max(1, _env_int("AGENTS_REQUEST_THREADS", 8))
# Reads (GET, HEAD, OPTIONS) take their thread from a lane of their own of this many, so a page
# or a list never waits behind a burst of run starts queued for the threads above.
AGENTS_READ_REQUEST_THREADS = max(1, _env_int("AGENTS_READ_REQUEST_THREADS", 2))
# A run executed for a request (sync run, chat round, OpenAI-compatible call) waits on the event
# loop; the code between its waits runs on this many step threads, its tools on the tool threads
# (runs/drive.py). Both stay under the PostgreSQL pools' sizes (10 default, 4 per
# org): more threads using connections at once than a pool holds only queue on the pool, and
# past AGENTS_DB_POOL_TIMEOUT_SECONDS answer 503 (60 mixed waiting runs did with 16 + 8).
AGENTS_RUN_STEP_THREADS = max(1, _env_int("AGENTS_RUN_STEP_THREADS", 4))
# Idle connections to the inference gateway each client keeps open for the next completion
# (the openai SDK's default is 100; a burst of 500 left 100 sockets open for good).
AGENTS_GATEWAY_KEEPALIVE_CONNECTIONS = max(0, _env_int("AGENTS_GATEWAY_KEEPALIVE_CONNECTIONS", 20))
AGENTS_RUN_TOOL_THREADS = max(1, _env_int("AGENTS_RUN_TOOL_THREADS", 32))
# Run-targets: how long a machine's claim long-poll waits for work before answering 204 (seconds).
AGENTS_CLAIM_WAIT_SECONDS = float(os.environ.get("AGENTS_CLAIM_WAIT_SECONDS", "25") or 25)
# How long a machine may take over a routed run (seconds); a claimed run not reported
# AGENTS_ROUTED_RUN_GRACE_SECONDS past it is recorded as an error by the periodic sweep.
AGENTS_ROUTED_RUN_TIMEOUT_SECONDS = _env_int("AGENTS_ROUTED_RUN_TIMEOUT_SECONDS", 600)
AGENTS_ROUTED_RUN_GRACE_SECONDS = _env_int("AGENTS_ROUTED_RUN_GRACE_SECONDS", 60)

# The coding engine (POST /v1/agents/coding, /v1/agents/repos). Push credentials are operator
# configuration: a JSON object {"<name>": {"ref": "env:VAR" | "file:/path", "grantedTo": ["slug", …]}};
# an org admin names one of them, never a variable or a file, and the value is read only when
# a push happens on this server.
AGENTS_REPO_CREDENTIALS = os.environ.get("AGENTS_REPO_CREDENTIALS", "").strip()
# Directories under which `file:` clone URLs may point (local set-ups and tests); empty = none.
AGENTS_REPO_FILE_ROOTS = [p.strip() for p in os.environ.get("AGENTS_REPO_FILE_ROOTS", "").split(",") if p.strip()]
# Private, loopback and link-local hosts a clone URL may name anyway (e.g. an in-house forge).
AGENTS_REPO_ALLOW_HOSTS = _env_list("AGENTS_REPO_ALLOW_HOSTS")
# Bound on one clone and on the working copy's disk use (MiB).
AGENTS_CODING_MAX_REPO_MB = _env_int("AGENTS_CODING_MAX_REPO_MB", 200)
# Bounds on what a coding run commits and pushes (MiB): one file, and all the files its commits add.
AGENTS_CODING_MAX_FILE_MB = _env_int("AGENTS_CODING_MAX_FILE_MB", 10)
AGENTS_CODING_MAX_PUSH_MB = _env_int("AGENTS_CODING_MAX_PUSH_MB", 50)
# Coding runs one org may have in flight (queued or running); one more answers 429.
AGENTS_CODING_MAX_CONCURRENT = _env_int("AGENTS_CODING_MAX_CONCURRENT", 2)
# The fee of a successful coding run, in cents (unset or negative: the run fee).
AGENTS_CODING_FEE_CENTS = _env_int("AGENTS_CODING_FEE_CENTS", -1)
# A coding run's whole time (seconds) when the request names none. A request may ask for up to
# AGENTS_RUN_TIMEOUT_SECONDS − 60 (the task queue kills a task at AGENTS_RUN_TIMEOUT_SECONDS).
AGENTS_CODING_TIMEOUT_SECONDS = _env_int("AGENTS_CODING_TIMEOUT_SECONDS", 540)
# Model turns one coding run may take before it must finish.
AGENTS_CODING_MAX_TURNS = _env_int("AGENTS_CODING_MAX_TURNS", 40)
# Where working copies are made (a fresh directory per run, removed at its end).
AGENTS_CODING_WORK_DIR = os.environ.get("AGENTS_CODING_WORK_DIR", "").strip()
# The sandbox of the `run` tool: `bubblewrap` (the only one) or `none` (coding runs refused, 503).
AGENTS_CODING_SANDBOX = os.environ.get("AGENTS_CODING_SANDBOX", "bubblewrap").strip().lower() or "bubblewrap"
# Limits of one sandboxed command: wall time (s), CPU time (s), address space (MiB), output (bytes).
AGENTS_SANDBOX_TIMEOUT_SECONDS = _env_int("AGENTS_SANDBOX_TIMEOUT_SECONDS", 120)
AGENTS_SANDBOX_CPU_SECONDS = _env_int("AGENTS_SANDBOX_CPU_SECONDS", 120)
AGENTS_SANDBOX_MEMORY_MB = _env_int("AGENTS_SANDBOX_MEMORY_MB", 1024)
AGENTS_SANDBOX_OUTPUT_BYTES = _env_int("AGENTS_SANDBOX_OUTPUT_BYTES", 64 * 1024)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # AGENTS_LOG_FORMAT: a logging format for every line (`make soak` asks for the level and logger).
    "formatters": {"line": {"format": os.environ.get("AGENTS_LOG_FORMAT", "%(message)s")}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "line"}},
    "root": {"handlers": ["console"], "level": os.environ.get("AGENTS_LOG_LEVEL", "WARNING")},
}

# How many org stores one process keeps registered as database aliases (LRU). Django walks
# every registered alias per request, so this bounds a request's cost whatever the org count.
AGENTS_STORE_CACHE_SIZE = _env_int("AGENTS_STORE_CACHE_SIZE", 64)
# An org admin's invitation link (console → Members) works once, for this many hours.
AGENTS_INVITE_TTL_HOURS = max(1, _env_int("AGENTS_INVITE_TTL_HOURS", 72))


# Agent identity (spec 001; the identity app, DRF under /v1/identity/).
AGENTS_IDENTITY_QUOTA = _env_int("AGENTS_IDENTITY_QUOTA", 50)  # identity agents per creating user per org
AGENTS_IDENTITY_CREATE_RATE = os.environ.get("AGENTS_IDENTITY_CREATE_RATE", "20/min").strip() or "20/min"
AGENTS_IDENTITY_GRACE_SECONDS = _env_int("AGENTS_IDENTITY_GRACE_SECONDS", 7 * 24 * 3600)
AGENTS_IDENTITY_ROTATIONS_PER_DAY = _env_int("AGENTS_IDENTITY_ROTATIONS_PER_DAY", 5)
AGENTS_IDENTITY_RESERVED_PREFIXES = _env_list("AGENTS_IDENTITY_RESERVED_PREFIXES") or ["hashee", "system", "admin", "official"]
AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS = _env_float("AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS", 5.0)
AGENTS_IDENTITY_BACKUP_MAX_BYTES = _env_int("AGENTS_IDENTITY_BACKUP_MAX_BYTES", 256 * 1024)  # encrypted_backup_blob_v2, base64 characters per user
AGENTS_ENVELOPE_MAX_BYTES = _env_int("AGENTS_ENVELOPE_MAX_BYTES", 256 * 1024)
AGENTS_ENVELOPE_RETENTION_DAYS = _env_int("AGENTS_ENVELOPE_RETENTION_DAYS", 30)
# Fernet key(s) encrypting webhook secrets at rest (comma-separated; the first encrypts). Unset:
# a development key derived from DJANGO_SECRET_KEY.
AGENTS_SECRETS_KEY = os.environ.get("AGENTS_SECRETS_KEY", "").strip()
# Webhook deliveries: hosts that may be private/loopback and plain http (local set-ups, tests).
AGENTS_WEBHOOK_ALLOW_HOSTS = _env_list("AGENTS_WEBHOOK_ALLOW_HOSTS")
AGENTS_WEBHOOK_TIMEOUT_SECONDS = _env_float("AGENTS_WEBHOOK_TIMEOUT_SECONDS", 10.0)
# The engine's retry schedule (webhooks.engine: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, then hourly,
# ±10 % jitter) times this scale; a delivery is dead this long after it was created; > 0 also
# caps the attempts.
AGENTS_WEBHOOK_RETRY_SCALE = _env_float("AGENTS_WEBHOOK_RETRY_SCALE", 1.0)
AGENTS_WEBHOOK_GIVE_UP_SECONDS = _env_float("AGENTS_WEBHOOK_GIVE_UP_SECONDS", 86400.0)
AGENTS_WEBHOOK_MAX_ATTEMPTS = _env_int("AGENTS_WEBHOOK_MAX_ATTEMPTS", 0)
# An org endpoint whose attempts all failed for this long is disabled (the dashboard says so).
AGENTS_WEBHOOK_DISABLE_AFTER_SECONDS = _env_float("AGENTS_WEBHOOK_DISABLE_AFTER_SECONDS", 86400.0)
# Threads per process making webhook attempts (0: inline in the task), and the longest retry
# wait an in-process timer re-queues (later ones: the minute tick).
AGENTS_WEBHOOK_THREADS = _env_int("AGENTS_WEBHOOK_THREADS", 4)
AGENTS_WEBHOOK_FAST_RETRY_SECONDS = _env_float("AGENTS_WEBHOOK_FAST_RETRY_SECONDS", 60.0)
# balance.low fires when a debit takes the org's balance below this (cents; 0: never).
AGENTS_WEBHOOK_BALANCE_LOW_CENTS = _env_int("AGENTS_WEBHOOK_BALANCE_LOW_CENTS", 500)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": [],
    "DEFAULT_THROTTLE_CLASSES": [],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["identity.parsers.IdentityJSONParser"],
    "EXCEPTION_HANDLER": "identity.exceptions.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Agents identity API",
    "DESCRIPTION": "Agents as identities (spec 001): tokens, keys, relations, opaque envelopes, webhook and WebSocket delivery.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "identity.openapi.add_stream_path", "identity.openapi.strict_request_bodies"],
}
# Throttle counters (and any other cache use): per process by default, Redis when REDIS_URL is set.
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
