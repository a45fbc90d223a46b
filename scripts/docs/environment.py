"""Every environment variable the server, `make run` and the runner read: one table, checked against the code.

`VARIABLES` holds each variable's words (default, meaning); `read_in_code()` finds every variable
the code reads (`os.environ[…]`, `os.environ.get(…)`, `env.get(…)`, `_env_int(…)` and the other
settings helpers, `port_from_env(…)`, the Procfile's `${NAME…}`) in the server's packages, the
runner and the Procfile, so the "read in" column is found, not written; `page()` renders
docs/operations/environment.md. `tests/docs/test_environment.py` fails when the code reads a
variable the table lacks, when the table names one nothing reads, when the committed page is
stale, and when a documented default (a single backticked value) differs from the setting the
site computes with no environment at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operations" / "environment.md"
#: Where the code that reads the environment lives (the SDKs document their own variables).
PACKAGES = ("server", "agents_site", "tenancy", "billing", "sessions", "runs", "agents", "targets", "webhooks", "identity",
            "coding", "chat", "openai_api", "guide", "console", "toolkit", "runner", "demo_gateway")
#: Read, but not configuration of this platform: the standard variables a sandboxed command or
#: the runner's key file passes on or follows, and names set by the code for its own children.
NOT_CONFIGURATION = {
    "PATH": "passed on to a command the runner's `shell` tool starts (`toolkit/shell.py`)",
    "LANG": "passed on to a command the runner's `shell` tool starts (`toolkit/shell.py`)",
    "Q_CLUSTER_NAME": "set by `manage.py qcluster --cluster-name` for django-q2 in its own process",
    "DJANGO_SETTINGS_MODULE": "set by manage.py",
}
READ = re.compile(r"""(?:environ\.get\(|environ\[|getenv\(|_env_(?:int|bool|float|list)\(|\benv\.get\(|port_from_env\(env,\s*)\s*["']([A-Z][A-Z0-9_]+)["']""")
PROCFILE_READ = re.compile(r"\$\{?([A-Z][A-Z0-9_]+)")


@dataclass(frozen=True)
class Var:
    """One environment variable: its name, its default in words, what it means."""

    name: str
    default: str
    meaning: str
    #: The setting that holds its value when it is not the variable's own name (dotted into dicts),
    #: or "" when no setting does (read elsewhere, or derived).
    setting: str | None = None


VARIABLES: tuple[Var, ...] = (
    Var('PORT', '`8000`',
        "`make run`'s port (a number from 1 to 65535; one that is taken stops `make run` in one sentence naming it)", setting=''),
    Var('AGENTS_DATA_DIR', '`./data`',
        'where the default SQLite database, the org files (`orgs/{slug}/agents.db`) and the org template live', setting=''),
    Var('DATABASE_URL', 'unset (SQLite `data/default.db`)',
        'the default database (users, orgs, API keys, ledger, task queue); also the server of org databases in postgres mode', setting=''),
    Var('AGENTS_ORG_DATABASE', '`sqlite`',
        "`sqlite`: one file per org; `postgres`: one database `agents_org_{slug}` per org on `DATABASE_URL`'s server"),
    Var('AGENTS_ORG_DATABASE_SERVERS', 'unset',
        "postgres org mode: comma-separated `postgres://` URLs of the servers org databases go to; a new org is placed by a rendezvous hash of its slug and the placement recorded (`tenancy.OrgPlacement`, admin read-only), so it never moves. Unset: `DATABASE_URL`'s server, nothing recorded"),
    Var('AGENTS_ORG_DATABASE_PREFIX', '`agents_org_`',
        "postgres org mode: start of every org database's name (`{prefix}{slug}`; several deployments can share a server)"),
    Var('AGENTS_BACKUP_URL', 'unset',
        'SQLite mode: the replica `manage.py replicate` ships every org file and the default database to (a directory, or a Litestream replica URL: `s3://…`, `gs://…`, `abs://…`, `sftp://…`); `make run` starts `replicate` when set. PostgreSQL org mode: the directory `backup_org_pg` writes dumps to. Unset: no replication'),
    Var('AGENTS_BACKUP_RETENTION_DAYS', '`7`',
        "how far back a restore reaches (Litestream's snapshot retention), and how long the replica of a removed org, or of a line ended by a restore, is kept"),
    Var('AGENTS_BACKUP_EXACT_HOURS', '`24`',
        "how long every shipped transaction stays restorable to the millisecond (Litestream's level-0 files); older moments restore at the 30 s / 5 min / 1 h compaction steps"),
    Var('AGENTS_BACKUP_POLL_SECONDS', '`2`',
        'how often `replicate` looks for new, removed and restored orgs'),
    Var('AGENTS_STORE_CACHE_SIZE', '`64`',
        'org stores one process keeps registered as database aliases (least recently used evicted)'),
    Var('AGENTS_INVITE_TTL_HOURS', '`72`',
        "how long an org admin's invitation link works (once)"),
    Var('AGENTS_DB_POOL_MAX_SIZE', '`10`',
        'PostgreSQL only: connections one process keeps at most to the default database (its pool)'),
    Var('AGENTS_ORG_DB_POOL_MAX_SIZE', '`4`',
        'postgres org mode only: connections one process keeps at most to each org database (one pool per cached org, emptied after 60 s idle, closed when the org leaves the store cache)'),
    Var('AGENTS_DB_POOL_TIMEOUT_SECONDS', '`10`',
        'how long a request waits for a pooled connection; past it the answer is 503 `store_busy` with `Retry-After`'),
    Var('AGENTS_GATEWAY_JWT_KEY', 'unset',
        'HS256 key of gateway-minted JWTs (claims `sub`, `org`, `org_admin`, `exp`); JWTs are refused while unset'),
    Var('AGENTS_API_KEY_CACHE_SECONDS', '`5`',
        "how long one process keeps an API key's validated principal (at most 30; 0: every request reads the key); a revocation, a removed membership or a changed role or user refuses or re-reads it on the next request through the revocation broadcast"),
    Var('REDIS_URL', 'unset',
        'Redis for the channel layer and the django-q2 broker (in-memory layer and ORM broker while unset)'),
    Var('INFERENCE_BASE_URL', 'unset',
        'OpenAI-compatible gateway (`…/v1`); runs answer 503 while unset'),
    Var('INFERENCE_API_KEY', 'unset',
        'key sent to the gateway'),
    Var('INFERENCE_CONNECT_TIMEOUT_SECONDS', '`10`',
        'connecting to the gateway'),
    Var('INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS', '`300`',
        "from the request to the reply's first piece (a CPU model reads the prompt first)"),
    Var('INFERENCE_TOKEN_TIMEOUT_SECONDS', '`60`',
        'the longest gap between two pieces of a streaming reply'),
    Var('INFERENCE_TIMEOUT_SECONDS', 'unset',
        "**deprecated** (the one gateway timeout of earlier versions, honoured so an upgrade keeps its limit; check `agents.W001`): when set, the default of the two timeouts above and the longest one completion may take, within the run's deadline"),
    Var('AGENTS_RUN_DEADLINE_SECONDS', '`AGENTS_RUN_TIMEOUT_SECONDS` − 60 (540)',
        'a run\'s whole agent loop (completions, retries, tools); past it the run ends "the run ran out of time" / "upstream timed out: the run\'s deadline passed"'),
    Var('AGENTS_DEFAULT_OUTPUT_TOKENS', '`1024`',
        '`max_tokens` of a completion whose agent sets no `maxTokens` (at most `AGENTS_MAX_OUTPUT_TOKENS`)'),
    Var('AGENTS_CONTEXT_WINDOW_TOKENS', '`8192`',
        'context window assumed of a model whose agent sets no `contextWindow` and whose gateway states none'),
    Var('AGENTS_GATEWAY_RUN_METADATA', 'off',
        "also send the run id in the completion's body as `metadata.agents_run_id` (the `X-Agents-Run-Id` header is always sent; strict servers refuse unknown body fields)"),
    Var('AGENTS_DEFAULT_MODEL', '`gpt-4o-mini`',
        'model of an agent created without one'),
    Var('AGENTS_DEMO_GATEWAY', 'off',
        "`1` (set by `make demo`): the gateway is the demo gateway; the console's top bar says replies are echoes"),
    Var('AGENTS_DEMO_GATEWAY_PORT', 'PORT + 1',
        "`make demo`: the demo gateway's port (a number that is not free stops `make demo` in one sentence)", setting=''),
    Var('AGENTS_FAILOVER_MODEL', 'unset',
        "model tried after the agent's model stays busy"),
    Var('AGENTS_MODEL_CATALOG_TTL_SECONDS', '`300`',
        "how long the gateway's `/models` list is cached"),
    Var('AGENTS_MAX_OUTPUT_TOKENS', '`4096`',
        "the most tokens one completion may write: `max_tokens` sent with every completion; an agent's `maxTokens` is at most this"),
    Var('CLOUD_AGENT_MAX_LONG_RUNNING', '`100`',
        'long-running (cron) agents allowed per org'),
    Var('CLOUD_AGENT_FEE_CENTS', '`100`',
        'fee of one successful run in cents; `0` makes runs free and ungated'),
    Var('AGENTS_CHAT_FEE_CENTS', 'unset (the run fee)',
        'fee of a chat round'),
    Var('AGENTS_OPENAI_FEE_CENTS', 'unset (the run fee)',
        'fee of an OpenAI-compatible call'),
    Var('AGENTS_CODING_FEE_CENTS', 'unset (the run fee)',
        'fee of a coding run'),
    Var('AGENTS_CHAT_HISTORY_CHARS', '`32000`',
        'characters of a stored conversation a round sends back to the model before the new messages (oldest turns dropped first; `0` sends none)'),
    Var('AGENTS_CHAT_ENQUEUE_WAIT_SECONDS', '`120`',
        "how long a round with `multitaskStrategy: enqueue` waits for the conversation's round in flight before 409 `conversation_busy`"),
    Var('AGENTS_SHARE_DEFAULT_DAYS', '`30`',
        'how long a share link of a conversation or a session lives when its creator names no expiry (days)'),
    Var('AGENTS_SHARE_MAX_DAYS', '`365`',
        'the longest a share link may live (days); a longer `expiresInDays` is refused 400'),
    Var('AGENTS_SHARE_READ_RATE', '`60/min`',
        'anonymous reads of shared pages per client address (`<n>/<sec|min|hour|day>`); 429 with `Retry-After` beyond'),
    Var('AGENTS_SESSION_BUS', '`channels`',
        'live fan-out of session frames and control commands: `channels` (the channel layer: in-memory, or Redis when `REDIS_URL` is set) or `local` (in-process only)'),
    Var('AGENTS_SSE_PING_SECONDS', '`25`',
        "interval of the stream's `: ping` comment"),
    Var('AGENTS_SSE_BUFFER_FRAMES', '`256`',
        'a stream subscriber this many frames behind is dropped'),
    Var('AGENTS_SSE_LINGER_MS', '`20`',
        'a stream that wrote less than this long ago gathers frames until it has passed, then writes them at once (a busy stream writes ≤ 50 times a second; 0: every frame at once)'),
    Var('AGENTS_SSE_CATCHUP_SECONDS', '`5`',
        'a stream with no live frames for this long re-reads the store (events from processes the bus cannot reach)'),
    Var('AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS', '`5`',
        "how long a control command waits for the running executor's acknowledgement"),
    Var('AGENTS_MODEL_ATTEMPTS', '`3`',
        'attempts per model before failover'),
    Var('AGENTS_RETRY_BASE_SECONDS', '`0.15`',
        'base delay of the equal-jitter retry backoff'),
    Var('AGENTS_RETRY_MAX_SECONDS', '`2.0`',
        'cap on one retry delay'),
    Var('AGENTS_INSTRUCTIONS_ROLE', '`system`',
        "role of the agent's instructions turn: `system` or `user` (the reference's choice)"),
    Var('AGENTS_TOOL_ROUNDS', '`8`',
        'tool rounds per run; the last is offered no tools'),
    Var('AGENTS_TOOL_CALL_TIMEOUT_SECONDS', '`30`',
        'limit of one tool call'),
    Var('AGENTS_MAX_AGENT_DEPTH', '`3`',
        'agents called as tools nest at most this deep'),
    Var('AGENTS_TOOL_HTTP_ALLOW', 'empty',
        'hosts the `http_get` tool may fetch (`host` or `*.domain`, comma-separated; a listed host may be private or loopback); empty turns it off. The fetch goes through `toolkit.outbound` (connects to the address it checked, follows no redirect)'),
    Var('AGENTS_MCP_STDIO', 'off',
        '`1` allows MCP servers started as a command on this host (stdio)'),
    Var('AGENTS_MCP_ALLOW_HOSTS', 'empty',
        'hosts an HTTP MCP server URL may name although they are (or resolve to) private, loopback, link-local, CGNAT or metadata addresses (comma-separated); any other such address is refused when the server is reached'),
    Var('AGENTS_MCP_LIST_TTL_SECONDS', '`60`',
        "how long an MCP server's tool list is cached"),
    Var('AGENTS_MCP_SESSION_IDLE_SECONDS', '`1800`',
        'the MCP server at `/v1/agents/mcp`: a session (the `Mcp-Session-Id` of a client of a protocol version before 2026-07-28) with no request in flight for this long is ended; the client opens a new one'),
    Var('AGENTS_PAUSE_TIMEOUT_SECONDS', '`AGENTS_RUN_DEADLINE_SECONDS` (540)',
        'a paused run not resumed within this ends as an error ("paused for longer than N s"); the run\'s deadline counts paused time, so a pause also ends at the deadline ("the run ran out of time while paused") and a longer value never applies (check `agents.W002`)'),
    Var('AGENTS_APPROVAL_TIMEOUT_SECONDS', '`86400`',
        'a run waiting for an approval ends `error` "approval timed out" (unbilled) past this; its only clock'),
    Var('AGENTS_CONTROL_POLL_SECONDS', '`0.5`',
        'how often a paused run checks for commands, and how often an executor without a shared bus reads its control log (a stop reaches a background run in another process within this)'),
    Var('AGENTS_IDEMPOTENCY_TTL_SECONDS', '`86400`',
        'how long an `Idempotency-Key` is remembered'),
    Var('OTEL_EXPORTER_OTLP_ENDPOINT', 'unset',
        'OTLP/HTTP endpoint for the `agent.run` → `agent.step` → `agent.tool` spans'),
    Var('OTEL_SERVICE_NAME', '`agents`',
        'service name on the spans'),
    Var('AGENTS_CATCHUP_SECONDS', '`300`',
        'a cron slot missed while nothing ran fires once on start-up if younger than this; older ones are recorded as missed'),
    Var('AGENTS_RUN_LEASE_SECONDS', '`60`',
        'a worker\'s lease on a background run, renewed every quarter of it; an expired lease ends the run "worker lost"'),
    Var('AGENTS_QUEUED_MAX_SECONDS', '`3600`',
        'a queued background run not started by then ends "never started"'),
    Var('AGENTS_SESSION_IDLE_SECONDS', '`3600`',
        'a running session idle this long is ended by the platform (control stop + status error)'),
    Var('AGENTS_SESSION_MAX_SECONDS', '`86400`',
        'any live session open this long is ended by the platform'),
    Var('AGENTS_Q_POLL_SECONDS', '`0.2`',
        "poll interval of django-q2's ORM broker", setting='Q_CLUSTER.poll'),
    Var('AGENTS_CLAIM_WAIT_SECONDS', '`25`',
        "how long a machine's claim long-poll waits for work"),
    Var('AGENTS_SHARED_REQUEST_THREADS', '`4`',
        'worker threads shared by the requests that mostly wait (claim long-poll, SSE stream) for their short sync steps'),
    Var('AGENTS_IDLE_REQUEST_THREADS', '`16`',
        'idle request threads a daphne process keeps for the next requests (each serves one request at a time)'),
    Var('AGENTS_REQUEST_THREADS', '`8`',
        "requests whose sync step runs at once in a daphne process (a burst waits on the loop for a thread; a run's wait on its model is not a sync step)"),
    Var('AGENTS_GATEWAY_KEEPALIVE_CONNECTIONS', '`20`',
        "idle connections to the inference gateway a process keeps open for the next completion (the SDK's default, 100, stayed open for good after a burst)"),
    Var('AGENTS_READ_REQUEST_THREADS', '`2`',
        'reads (GET, HEAD, OPTIONS) whose sync step runs at once, in a lane of their own: a read never queues behind a burst of writes'),
    Var('AGENTS_RUN_STEP_THREADS', '`4`',
        'threads running the steps of the runs a daphne process awaits on its event loop (short store transactions between model calls)'),
    Var('AGENTS_RUN_TOOL_THREADS', '`32`',
        "threads running those runs' tool calls"),
    Var('AGENTS_LISTEN_BACKLOG', '`2048`',
        "daphne's listen backlog (`make run`'s Procfile; Twisted's default is 50, which dropped 1,400–2,700 connection attempts when 500 clients connected at once, issue 26). The kernel caps it at `net.core.somaxconn` (4096 on current Linux)", setting=''),
    Var('AGENTS_FAST_HANDLER', '`1`',
        "`0`: serve HTTP with Django's own ASGI handler and middleware instead of the fast path (`server/asgi.py`, `inline_middleware.py`); same behaviour, more CPU per request"),
    Var('AGENTS_GC_FREEZE', '`1`',
        "daphne and `qcluster` freeze their start-up objects out of the garbage collector's full walks once they have loaded (`gc.freeze()`, `server/heap.py`): a full collection otherwise walks ~225,000 start-up objects (122 ms at load average 3.2 on this machine, `bench/heap.py`); `0`: off"),
    Var('AGENTS_POOLED_SQLITE', '`1`',
        "`0`: open SQLite files with Django's own engine instead of the one that keeps idle connections (`agents_site/db_backends/sqlite3`)"),
    Var('AGENTS_SQLITE_IDLE_PER_FILE', '`8`',
        'idle SQLite connections kept per database file for reuse (0: close every connection)'),
    Var('AGENTS_SQLITE_IDLE_CONNECTIONS', '`64`',
        'idle SQLite connections kept in one process across all files (least recently used file closed first)'),
    Var('AGENTS_ROUTED_RUN_TIMEOUT_SECONDS', '`600`',
        'time a machine has to report a routed run'),
    Var('AGENTS_ROUTED_RUN_GRACE_SECONDS', '`60`',
        'a claimed routed run not reported within its time plus this is ended `error` by the minute\'s sweep ("the machine did not report the run in time"), unbilled'),
    Var('AGENTS_SHUTDOWN_GRACE_SECONDS', '`10`',
        'SIGTERM / Ctrl-C on `qcluster`: the cluster takes no new run and gives the run in flight this long, then ends it `error` "worker stopped" (unbilled, never re-run) and exits'),
    Var('AGENTS_Q_WORKERS', '`2`',
        'django-q2 worker processes', setting='Q_CLUSTER.workers'),
    Var('AGENTS_RUN_TIMEOUT_SECONDS', '`600`',
        'longest a background task may run'),
    Var('AGENTS_REPO_CREDENTIALS', 'unset',
        'push credentials the operator grants: JSON `{"<name>": {"ref": "env:VAR" or "file:/path", "grantedTo": ["<org slug>", …]}}`'),
    Var('AGENTS_REPO_FILE_ROOTS', 'empty',
        'directories `file:` clone URLs may point under (comma-separated); empty refuses every `file:` URL'),
    Var('AGENTS_REPO_ALLOW_HOSTS', 'empty',
        'private/loopback/link-local/CGNAT/metadata hosts a clone URL may name anyway (comma-separated); every clone, fetch and push resolves the host once, checks it and pins git to that address (`http.curloptResolve`, no redirects; ssh `HostName`)'),
    Var('AGENTS_CODING_MAX_REPO_MB', '`200`',
        "bound on a clone's repository database and on the working copy (MiB)"),
    Var('AGENTS_CODING_MAX_FILE_MB', '`10`',
        'largest file a coding run commits (MiB); a turn with a bigger one is not committed and the model is told'),
    Var('AGENTS_CODING_MAX_PUSH_MB', '`50`',
        "bytes all of a coding run's commits may add (MiB); the turn that would pass it is not committed"),
    Var('AGENTS_CODING_MAX_CONCURRENT', '`2`',
        'coding runs in flight per org; one more answers 429'),
    Var('AGENTS_CODING_TIMEOUT_SECONDS', '`540`',
        "a coding run's time when the request names none"),
    Var('AGENTS_CODING_MAX_TURNS', '`40`',
        'model turns a coding run may take before it must have called `finish`'),
    Var('AGENTS_CODING_WORK_DIR', 'the temp dir',
        'where per-run working copies are made (removed when the run ends)'),
    Var('AGENTS_CODING_SANDBOX', '`bubblewrap`',
        "the `run` tool's sandbox; `none` refuses coding runs (503)"),
    Var('AGENTS_SANDBOX_TIMEOUT_SECONDS', '`120`',
        'wall-clock limit of one sandboxed command (the process group is killed)'),
    Var('AGENTS_SANDBOX_CPU_SECONDS', '`120`',
        'CPU-time limit of one sandboxed command'),
    Var('AGENTS_SANDBOX_MEMORY_MB', '`1024`',
        'address-space limit of one sandboxed command'),
    Var('AGENTS_SANDBOX_OUTPUT_BYTES', '`65536`',
        'output kept from one command; more stops it'),
    Var('AGENTS_HTTPS', 'unset',
        '`1` marks session and CSRF cookies `Secure`'),
    Var('DJANGO_SECRET_KEY', 'a development key',
        "Django's secret key: set it in any real deployment", setting=''),
    Var('DJANGO_DEBUG', '`0`',
        'Django debug mode', setting='DEBUG'),
    Var('DJANGO_ALLOWED_HOSTS', '`127.0.0.1,localhost,testserver`',
        'host names served', setting='ALLOWED_HOSTS'),
    Var('AGENTS_BIND', '`127.0.0.1`',
        'the address `make run` serves on (`0.0.0.0` for every interface; the banner then shows 127.0.0.1)', setting=''),
    Var('AGENTS_LOG_LEVEL', '`WARNING`',
        'root log level', setting='LOGGING.root.level'),
    Var('AGENTS_LOG_FORMAT', '`%(message)s`',
        "the format of every log line (Python's `logging` format; `make soak` asks for the level and the logger)"),
    Var('AGENTS_IDENTITY_QUOTA', '`50`',
        'identity agents one user may create per org (`agent_limit_exceeded`, AGT_008)'),
    Var('AGENTS_IDENTITY_CREATE_RATE', '`20/min`',
        '`POST /v1/identity/agents` per user (`<n>/<sec|min|hour|day>`); 429 `rate_limited` beyond'),
    Var('AGENTS_IDENTITY_GRACE_SECONDS', '`604800`',
        'how long a normal rotation keeps the old agent token and keys valid (7 days)'),
    Var('AGENTS_IDENTITY_ROTATIONS_PER_DAY', '`5`',
        'token rotations per agent per 24 h (429 `rotation_limit` beyond)'),
    Var('AGENTS_IDENTITY_RESERVED_PREFIXES', '`hashee,system,admin,official`',
        '`custom_id` prefixes refused'),
    Var('AGENTS_IDENTITY_HEALTH_TIMEOUT_SECONDS', '`5`',
        'timeout of one `health_check_url` probe'),
    Var('AGENTS_IDENTITY_BACKUP_MAX_BYTES', '`262144`',
        'largest `encrypted_backup_blob_v2` (base64 characters) a user may store (413 above)'),
    Var('AGENTS_ENVELOPE_MAX_BYTES', '`262144`',
        'largest envelope: the length of the v1 envelope string (docs/envelopes.md); 413 beyond'),
    Var('AGENTS_ENVELOPE_RETENTION_DAYS', '`30`',
        'envelopes and their delivery logs are deleted after this'),
    Var('AGENTS_SECRETS_KEY', 'derived from `DJANGO_SECRET_KEY`',
        'Fernet key(s), comma-separated, first encrypts: webhook secrets at rest (rotate by prepending a new key)'),
    Var('AGENTS_BENCH_STORAGE_GUARD_OFF', 'unset',
        "bench only, never in a deployment: `1` leaves the credential guard at the storage boundary out of the process (`sessions/storage_guard.py`), so `bench/guard_ab.py` measures the same code without it", setting=''),
    Var('AGENTS_WEBHOOK_ALLOW_HOSTS', 'empty',
        'hosts webhooks and health probes may reach although private/loopback/link-local/CGNAT/metadata, also over plain http (local set-ups, tests); every attempt connects to the address it checked (`toolkit.outbound`)'),
    Var('AGENTS_WEBHOOK_TIMEOUT_SECONDS', '`10`',
        'timeout of one webhook attempt'),
    Var('AGENTS_WEBHOOK_GIVE_UP_SECONDS', '`86400`',
        'a delivery whose attempt this long after its event fails is dead (retries: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, then hourly, ±10 %)'),
    Var('AGENTS_WEBHOOK_RETRY_SCALE', '`1`',
        'multiplies the retry schedule (tests: 0)'),
    Var('AGENTS_WEBHOOK_MAX_ATTEMPTS', '`0`',
        "> 0 also caps a delivery's attempts"),
    Var('AGENTS_WEBHOOK_DISABLE_AFTER_SECONDS', '`86400`',
        'an org endpoint failing this long is disabled'),
    Var('AGENTS_WEBHOOK_THREADS', '`4`',
        'threads per process making webhook attempts, at most 2 at once per receiver origin, the rest queued per origin (0: inline in the task)'),
    Var('AGENTS_WEBHOOK_FAST_RETRY_SECONDS', '`60`',
        "retries due within this go back to their origin's queue by the process's timer at their due time; later ones by the minute tick (0: no timer, the tick alone)"),
    Var('AGENTS_WEBHOOK_BALANCE_LOW_CENTS', '`500`',
        '`balance.low` fires when a debit takes the balance below this (0: never)'),
    Var('AGENTS_SERVER', 'unset',
        'the runner (`python -m runner`, `runner verify`): the server it talks to (`--server`)', setting=""),
    Var('AGENTS_API_KEY', 'unset',
        'the runner: an API key of the org (`--api-key`); `runner verify` needs one only for a session id', setting=""),
    Var('RUNNER_LABEL', 'the host name',
        "the runner: the machine's name in the console (`--label`)", setting=""),
    Var('RUNNER_ALLOW_SHELL', 'unset (no `shell` tool)',
        'the runner: the one directory its `shell` tool works in (`--allow-shell DIR`); unset offers no `shell` tool', setting=""),
    Var('RUNNER_ALLOW_UNSANDBOXED', 'off',
        "the runner: `1` lets a coding run's `run` tool execute without bubblewrap on this machine (`--allow-unsandboxed-commands`)", setting=""),
    Var('RUNNER_CODING_WORK_DIR', 'the temp dir',
        "the runner: where a routed coding run's working copies are made (`--coding-work-dir`)", setting=""),
    Var('RUNNER_MODEL', 'unset (the agent\'s model)',
        "the runner: the model to use instead of the agent's, when this machine's gateway names it otherwise (`--model`)", setting=""),
    Var('RUNNER_LOG_LEVEL', '`INFO`',
        "the runner's log level (`--log-level`)", setting=""),
    Var('XDG_CONFIG_HOME', '`~/.config`',
        'the runner keeps its claim keys under `$XDG_CONFIG_HOME/agents-runner/` (mode 0600)', setting=""),
)


def read_in_code(root: Path = ROOT) -> dict[str, set[str]]:
    """Return {variable: {file, …}} of every variable read in the server's packages, the runner and the Procfile."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for match in READ.finditer(path.read_text(encoding="utf-8")):
                found.setdefault(match.group(1), set()).add(str(path.relative_to(root)))
    serve = (root / "server" / "management" / "commands" / "serve.py").read_text(encoding="utf-8")
    if "def port_from_env(env: dict, name: str = \"PORT\"" in serve:  # `port_from_env(env)` reads PORT by default
        found.setdefault("PORT", set()).add("server/management/commands/serve.py")
    for line in (root / "Procfile").read_text(encoding="utf-8").splitlines():
        for name in PROCFILE_READ.findall(line):
            found.setdefault(name, set()).add("Procfile")
    for name in NOT_CONFIGURATION:
        found.pop(name, None)
    return found


def _where(files: set[str]) -> str:
    """Return the files as short names: `settings.py`, `serve.py`, `Procfile`, `runner/cli.py`."""
    short = []
    for name in sorted(files):
        if name == "agents_site/settings.py":
            short.append("settings")
        elif name == "server/management/commands/serve.py":
            short.append("manage.py serve")
        elif name == "Procfile":
            short.append("Procfile")
        else:
            short.append(name.removesuffix(".py"))
    return ", ".join(f"`{s}`" for s in short)


def page(root: Path = ROOT) -> str:
    """Return docs/operations/environment.md: one table, in `VARIABLES`' order, with where each is read."""
    found = read_in_code(root)
    lines = [
        "# Environment variables",
        "",
        "<!-- Generated by scripts/docs/generate.py from scripts/docs/environment.py and the code that reads each variable; do not edit. -->",
        "",
        "Every variable has a default that works with no environment at all: `make run` needs none. The",
        "server reads them when a process starts (`agents_site/settings.py`, unless the last column says",
        "otherwise), so every web and worker process of a deployment needs the same environment.",
        "\"read in\" is where the code reads it, found by `scripts/docs/environment.py`; a test fails when",
        "the code reads a variable this table lacks.",
        "",
        "| variable | default | meaning | read in |",
        "|---|---|---|---|",
    ]
    for var in VARIABLES:
        meaning = var.meaning.replace("|", "\\|")
        lines.append(f"| `{var.name}` | {var.default} | {meaning} | {_where(found.get(var.name, set()))} |")
    lines += ["", "Read, but not this platform's configuration:", ""]
    lines += [f"- `{name}`: {why}" for name, why in NOT_CONFIGURATION.items()]
    lines.append("")
    return "\n".join(lines)


def setting_value(settings, var: Var):
    """Return the value of `var`'s setting in `settings` (a module or Django's settings), or raise AttributeError."""
    path = var.name if var.setting is None else var.setting
    if not path:
        raise AttributeError(var.name)
    head, *rest = path.split(".")
    value = getattr(settings, head)
    for key in rest:
        value = value[key]
    return value


#: Words of a default that state a value: "off", "unset" and "empty" mean the setting is false or empty.
NOTHING = ("off", "unset", "empty")


def documented_value(var: Var) -> str | None:
    """Return the default when it states a value — one backticked literal (`600`, `system`) or one of
    `NOTHING` — else None (words such as "the temp dir", checked by reading them)."""
    text = var.default.strip()
    if text in NOTHING:
        return text
    match = re.fullmatch(r"`([^`]*)`", text)
    return match.group(1) if match else None


def procfile_defaults(root: Path = ROOT) -> dict[str, str]:
    """Return {variable: default} of the Procfile's `${NAME:-default}` expansions."""
    text = (root / "Procfile").read_text(encoding="utf-8")
    return dict(re.findall(r"\$\{([A-Z][A-Z0-9_]+):-([^}]*)\}", text))


def same(documented: str, value) -> bool:
    """Return whether a documented default `documented` (text) states the setting's `value`."""
    if documented in NOTHING:
        return not value
    if isinstance(value, bool):
        return documented.lower() in (("1", "true", "on") if value else ("0", "false", "off", ""))
    if isinstance(value, (int, float)):
        try:
            return float(documented) == float(value)
        except ValueError:
            return False
    if isinstance(value, (list, tuple)):
        return documented == ",".join(str(v) for v in value)
    if isinstance(value, Path):
        return False
    return documented == str(value)
