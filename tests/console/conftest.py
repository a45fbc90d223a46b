"""Fixtures of the console tests: signed-in Django clients, rows to look at, and the browser
harness (a live daphne + Debian's chromium driven by Playwright; never a downloaded browser)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "pw"  # tests/conftest.py make_org's password for every user it creates


def signed_in(handle) -> Client:
    """Return a Django test client signed in as `handle.user` (a session login, like a browser)."""
    client = Client()
    handle.user.refresh_from_db()  # a later make_org(username=…) may have re-set the password
    client.force_login(handle.user)
    return client


@pytest.fixture
def admin_client(org_a) -> Client:
    """A session-login client of org_a's admin."""
    return signed_in(org_a)


@pytest.fixture
def member(make_org):
    """An org handle whose user is a plain member (not an org admin)."""
    return make_org("m", admin=False)


@pytest.fixture
def make_agent():
    """Return `make_agent(handle, name, **fields) -> Agent`, created through the service."""
    from agents.services import AgentInput, agent_create

    def factory(handle, name: str, **fields):
        with handle.context():
            return agent_create(data=AgentInput(name=name, **fields))

    return factory


@pytest.fixture
def make_runs():
    """Return `make_runs(handle, agent, n, status="ok") -> [Run]`: finished runs, oldest first.

    Rows are written straight to the org's store (the run path belongs to the runs app); run
    i finished i minutes after the first, so "newest first" is well defined.
    """
    from agents_site.ids import mint_id
    from runs.models import Run

    def factory(handle, agent, n: int, status: str = "ok"):
        start = timezone.now() - timedelta(hours=1)
        with handle.context():
            rows = []
            for i in range(n):
                at = start + timedelta(minutes=i)
                rows.append(
                    Run.objects.create(
                        id=mint_id("run"), agent=agent, agent_name=agent.name, status=status, model=agent.model,
                        input=f"input {i}", output=f"output {i}" if status == "ok" else "",
                        error="" if status == "ok" else f"error {i}", duration_ms=10 + i,
                        created_at=at, started_at=at, finished_at=at,
                    )
                )
            return rows

    return factory


# --- the browser harness -------------------------------------------------------------------


@pytest.fixture(scope="session")
def console_server(django_db_setup, django_db_blocker, upstream_server):
    """One real daphne for the browser tests, wired to the loopback upstream, free runs.

    It reads the pytest default database file, so browser tests use `transactional_db`
    (their rows are committed). Runs are free (`CLOUD_AGENT_FEE_CENTS=0`): the money path has
    its own tests; here the console is under test.
    """
    from tests.support.live import LiveServer

    with django_db_blocker.unblock():
        server = LiveServer(
            {
                "INFERENCE_BASE_URL": upstream_server.base_url,
                "INFERENCE_API_KEY": "test-key",
                "AGENTS_DEFAULT_MODEL": "test-model",
                "CLOUD_AGENT_FEE_CENTS": "0",
                "AGENTS_SSE_CATCHUP_SECONDS": "1",
                "AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1",  # the webhook page's test sends reach a loopback receiver
            }
        ).start()
    yield server
    server.stop()


@pytest.fixture(scope="package")
def browser():
    """Debian's chromium under Playwright (headless), one for the console tests.

    Playwright's sync API keeps an event loop running in the test thread, which Django's ORM
    takes for an async context; Playwright's documented remedy for Django tests is
    `DJANGO_ALLOW_ASYNC_UNSAFE`, set here only while this browser is open.
    """
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/test-prereqs.sh (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            instance = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield instance
            instance.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, console_server, upstream_server):
    """A fresh browser context (no cookies) and page on the live server; 30 s default timeout.

    Every wait is on a condition, so the ceiling costs a passing test nothing; 10 s was short of
    a chat round beside a CPU hog with two test workers (load average 4–5).
    """
    upstream_server.reset()
    upstream_server.models = ["test-model", "best"]
    context = browser.new_context(base_url=console_server.url, viewport={"width": 1280, "height": 860})
    context.set_default_timeout(30_000)
    pg = context.new_page()
    yield pg
    context.close()


@pytest.fixture
def login():
    """Return `login(page, handle)`: sign in through the login form; land on the dashboard."""

    def do(pg, handle):
        # The live server runs the site's settings, whose hashers do not read the tests' fast
        # MD5 hashes: store a PBKDF2 hash (few iterations; the server upgrades it on login).
        from django.contrib.auth.hashers import PBKDF2PasswordHasher

        hasher = PBKDF2PasswordHasher()
        handle.user.password = hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
        handle.user.save(update_fields=["password"])
        pg.goto("/console/login/")
        pg.fill("#id_username", handle.user.get_username())
        pg.fill("#id_password", PASSWORD)
        pg.click("button[type=submit]")
        pg.wait_for_url("**/console/")

    return do


@pytest.fixture
def shoot():
    """Return `shoot(page, name)`: a full-page PNG of the current page.

    Written to `$AGENTS_SCREENSHOT_DIR` when set (`make screenshots` sets docs/screenshots),
    else to the run's data directory, so ordinary test runs never touch tracked files.
    """
    from django.conf import settings

    target = Path(os.environ.get("AGENTS_SCREENSHOT_DIR") or Path(settings.AGENTS_DATA_DIR) / "screenshots")
    target.mkdir(parents=True, exist_ok=True)

    def do(pg, name: str) -> Path:
        path = target / f"{name}.png"
        pg.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 1000
        return path

    return do
