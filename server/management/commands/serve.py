"""`manage.py serve [--demo]`: what `make run` (and `make demo`) do, in one process that says what it is doing.

1. Check the port: `PORT` (8000 when unset) must be a number from 1 to 65535 and free on
   `AGENTS_BIND` (127.0.0.1); otherwise stop with one sentence naming the port and the variable.
2. Prepare, each step announced: migrate the default database and every org store, collect the
   static files (both skipped when nothing they depend on changed since the last start: a stamp in
   `AGENTS_DATA_DIR`), create the demo org (its login and key printed the first time only), ensure
   the minute schedules.
3. Start honcho with that port (`honcho start -p PORT web worker …`: honcho gives the first process
   `PORT`, so daphne listens where the banner says) and print the banner only once
   `/v1/agents/openapi.json` answers there.

`--demo` (`make demo`) also starts the demo gateway (`python -m demo_gateway`, model `demo`, on
`AGENTS_DEMO_GATEWAY_PORT`, default PORT + 1) and points the server at it (`INFERENCE_BASE_URL`,
`AGENTS_DEFAULT_MODEL=demo`, `AGENTS_DEMO_GATEWAY=1` for the console's notice). Without `--demo`
nothing changes: a server with no gateway answers runs 503 `inference_unavailable`.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

DEFAULT_PORT = 8000
#: Seconds between "still starting" lines while daphne loads.
PROGRESS_SECONDS = 10.0


def port_from_env(env: dict, name: str = "PORT", default: int = DEFAULT_PORT) -> int:
    """Return the TCP port `env[name]` names (`default` when unset or blank).

    Raises `CommandError` with one sentence naming the variable when it is not a number from 1
    to 65535. Example: `{"PORT": "80a"}` → "PORT=80a is not a port number: …".
    """
    raw = (env.get(name) or "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise CommandError(f"{name}={raw} is not a port number: set {name} to a number from 1 to 65535 (unset, make run serves on {default}).")
    return int(raw)


def check_port_free(host: str, port: int, name: str) -> None:
    """Raise `CommandError` naming `port` and the variable `name` when `host`:`port` cannot be bound."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(f"Port {port} ({name}) is taken on {host} ({exc.strerror or exc}): stop what listens there or choose another, "
                               f"e.g. {name}={port + 10} make run.") from None


def honcho_command(*, venv_bin: Path, port: int, demo: bool, backup: bool) -> list[str]:
    """Return the honcho command line: `web` first so honcho hands it `PORT` = `port` exactly."""
    processes = ["web", "worker"] + (["gateway"] if demo else []) + (["backup"] if backup else [])
    return [str(venv_bin / "honcho"), "start", "-f", "Procfile", "-p", str(port), *processes]


def _digest(entries) -> str:
    sha = hashlib.sha256()
    for entry in entries:
        sha.update(repr(entry).encode())
        sha.update(b"\0")
    return sha.hexdigest()


def migrations_fingerprint() -> str:
    """Return a digest of every installed app's migration files (names and contents), the Django
    version and where the stores are: equal digests mean `migrate` and `migrate_orgs` have nothing to do."""
    entries: list = [sys.version_info[:2], __import__("django").VERSION, settings.DATABASES["default"].get("NAME"),
                     settings.DATABASES["default"].get("HOST"), getattr(settings, "AGENTS_ORG_DATABASE", ""),
                     getattr(settings, "AGENTS_ORG_DATABASE_PREFIX", "")]
    for config in sorted(apps.get_app_configs(), key=lambda c: c.label):
        folder = Path(config.path) / "migrations"
        if folder.is_dir():
            for path in sorted(folder.glob("*.py")):
                entries.append((config.label, path.name, hashlib.sha256(path.read_bytes()).hexdigest()))
    return _digest(entries)


def static_fingerprint() -> str:
    """Return a digest of the files `collectstatic` would copy (path, size, mtime) and its target."""
    from django.contrib.staticfiles.finders import get_finders

    entries: list = [str(settings.STATIC_ROOT)]
    for finder in get_finders():
        for path, storage in finder.list([]):
            stat = os.stat(storage.path(path))
            entries.append((path, stat.st_size, stat.st_mtime_ns))
    entries[1:] = sorted(entries[1:])
    return _digest(entries)


class Command(BaseCommand):
    help = "Check the port, prepare (migrate, static, demo org, schedules; skipped when unchanged), start daphne + qcluster, print where it serves."

    def add_arguments(self, parser):
        parser.add_argument("--demo", action="store_true", help="also start the demo gateway (model 'demo', echoes) and use it")
        parser.add_argument("--prepare-only", action="store_true", help="check the port and prepare, then exit (tests)")

    def say(self, text: str) -> None:
        self.stdout.write(f"make run: {text}")
        self.stdout.flush()

    def handle(self, *args, **options):
        env = dict(os.environ)
        port = port_from_env(env)
        host = (env.get("AGENTS_BIND") or "127.0.0.1").strip()
        check_port_free(host, port, "PORT")
        if options["demo"]:
            gateway_port = port_from_env(env, "AGENTS_DEMO_GATEWAY_PORT", port + 1)
            check_port_free("127.0.0.1", gateway_port, "AGENTS_DEMO_GATEWAY_PORT")
            env.update(INFERENCE_BASE_URL=f"http://127.0.0.1:{gateway_port}/v1", AGENTS_DEFAULT_MODEL="demo",
                       AGENTS_DEMO_GATEWAY="1", AGENTS_DEMO_GATEWAY_PORT=str(gateway_port))
            env.pop("INFERENCE_API_KEY", None)
        self.prepare()
        if options["prepare_only"]:
            return
        backup = bool((env.get("AGENTS_BACKUP_URL") or "").strip())
        command = honcho_command(venv_bin=Path(sys.executable).parent, port=port, demo=options["demo"], backup=backup)
        self.say(f"starting daphne on {host}:{port} and a django-q2 cluster" + (" and the demo gateway" if options["demo"] else "") + "…")
        honcho = subprocess.Popen(command, env=env, cwd=settings.BASE_DIR)
        signal.signal(signal.SIGTERM, lambda *_: honcho.send_signal(signal.SIGTERM))
        try:
            if self.wait_until_serving(honcho, host, port):
                where = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
                self.say(f"Serving on http://{where}:{port}/  (console: /console/, API docs: /v1/agents/docs, admin: /admin/)"
                         + ("\nmake run: demo gateway: model 'demo' echoes what you send; '/tool calculator {\"expression\":\"6*7\"}' calls a tool. "
                            "It is not a model." if options["demo"] else ""))
            code = honcho.wait()
        except KeyboardInterrupt:  # Ctrl-C: honcho (same process group) stops its processes; wait for it
            honcho.send_signal(signal.SIGINT)
            honcho.wait()
            self.say("stopped.")
            return
        if code:
            raise CommandError(f"the server stopped (honcho exit code {code}).", returncode=code)

    def prepare(self) -> None:
        """Migrate, collect static files, create the demo org and ensure schedules; skip what has not changed."""
        stamp_path = Path(settings.AGENTS_DATA_DIR) / ".make-run-stamp.json"
        try:
            stamp = json.loads(stamp_path.read_text())
        except (OSError, ValueError):
            stamp = {}
        migrations = migrations_fingerprint()
        if stamp.get("migrations") == migrations:
            self.say("database and org stores up to date (migrations unchanged since the last start)")
        else:
            self.say("migrating the database…")
            call_command("migrate", interactive=False, verbosity=0)
            self.say("migrating every org store…")
            call_command("migrate_orgs", stdout=self.stdout)
            stamp["migrations"] = migrations
            stamp_path.write_text(json.dumps(stamp))
        static = static_fingerprint()
        if stamp.get("static") == static and Path(settings.STATIC_ROOT).is_dir():
            self.say("static files up to date")
        else:
            self.say("collecting static files…")
            call_command("collectstatic", interactive=False, verbosity=0)
            stamp["static"] = static
            stamp_path.write_text(json.dumps(stamp))
        self.say("the demo org…")
        call_command("bootstrap_demo", stdout=self.stdout)
        self.say("the minute schedules…")
        call_command("ensure_schedules", stdout=self.stdout)

    def wait_until_serving(self, honcho: subprocess.Popen, host: str, port: int) -> bool:
        """Poll `/v1/agents/openapi.json` until it answers 200 (True) or honcho exits (False)."""
        where = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        url = f"http://{'[' + where + ']' if ':' in where else where}:{port}/v1/agents/openapi.json"
        started = last = time.monotonic()
        while honcho.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() - last >= PROGRESS_SECONDS:
                last = time.monotonic()
                self.say(f"still starting ({int(last - started)} s; waiting for {url} to answer)…")
            time.sleep(0.2)  # a poll interval while another process starts, not a test wait
        return False
