"""The daemon's life: register, key, heartbeat, claim, execute, report; back off; stop cleanly.

`Daemon(config).run()` returns the process exit code: 0 after a clean stop (SIGTERM/SIGINT),
2 when the server refuses the API key or the registration, 3 when the machine's claim key was
superseded (rotated by another daemon or the owner) or the machine was removed.

A run whose model calls a tool the agent's approval rules name is reported `waiting` (issue 28):
the daemon holds nothing for it and goes back to claiming; once a person answers, the run is
offered again and whichever claim wins it resumes it from the claim's `resume`.

Backoff: every call that fails transiently (network, 429, 5xx) is retried with exponential
backoff and jitter (tenacity; 1 s doubling to 30 s, `--backoff-max`), forever for claims, until a stop. On stop
the waiting claim is abandoned at once; a run in progress ends at its next step (or after
`stop_grace` seconds) and is reported as an error, so the server never waits on a dead run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass
from pathlib import Path

import openai
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from runner import gitinfo, keyfile, machine
from runner.client import ClaimRefused, Fatal, ServerClient, Transient
from runner.execute import Execution, RoutedRun
from runner.coding import CODING_KIND, CodingExecution
from toolkit.builtin import async_tools
from toolkit.sandbox import machine_sandbox
from toolkit.shell import Shell
from toolkit.wire import MachineSandbox, TargetKind

logger = logging.getLogger("runner")

EXIT_OK, EXIT_FATAL, EXIT_SUPERSEDED = 0, 2, 3


@dataclass
class Config:
    """Everything the daemon needs; built by `runner.cli` from flags and environment."""

    server: str
    api_key: str
    label: str
    kind: str = TargetKind.MACHINE
    host: str = ""
    key_dir: Path | None = None
    shell_root: Path | None = None
    http_allow: tuple[str, ...] = ()  # --allow-http: hosts the http_get tool may fetch (empty: no http_get)
    heartbeat_seconds: float = 30.0
    claim_timeout: float = 60.0
    inference_base_url: str = ""
    inference_api_key: str = ""
    model_override: str = ""
    backoff_initial: float = 1.0
    backoff_max: float = 30.0
    stop_grace: float = 10.0
    allow_unsandboxed: bool = False  # --allow-unsandboxed-commands: coding `run` without bubblewrap
    coding_work_dir: str | None = None


class Stopped(Exception):
    """The daemon was asked to stop while waiting."""


class Daemon:
    """One runner process for one machine."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.client = ServerClient(server=config.server, api_key=config.api_key, claim_timeout=config.claim_timeout)
        self.stopping = asyncio.Event()
        self.target_id = ""
        self.key = ""
        self.key_path: Path | None = None
        self._claim_task: asyncio.Task | None = None
        self.inference = None
        if config.inference_base_url:
            self.inference = openai.AsyncOpenAI(base_url=config.inference_base_url, api_key=config.inference_api_key or "none", max_retries=0)
        self.tools = async_tools(http_allow=config.http_allow)
        if config.shell_root is not None:
            self.tools["shell"] = Shell(config.shell_root).tool()
        self.sandbox = machine_sandbox(allow_unsandboxed=config.allow_unsandboxed)

    # -- stopping ---------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the daemon to stop: abandon a waiting claim, end a running run at its next step."""
        if not self.stopping.is_set():
            logger.info("stopping")
        self.stopping.set()
        if self._claim_task is not None and not self._claim_task.done():
            self._claim_task.cancel()

    async def _sleep(self, seconds: float) -> None:
        """Sleep `seconds`, or raise `Stopped` as soon as a stop is asked."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)
        if self.stopping.is_set():
            raise Stopped()

    def _retrying(self, *, attempts: int | None = None) -> AsyncRetrying:
        # Bounded calls (a report) keep retrying through a stop; unbounded ones end at a stop.
        stop = stop_after_attempt(attempts) if attempts else (lambda state: self.stopping.is_set())
        return AsyncRetrying(
            retry=retry_if_exception_type(Transient),
            wait=wait_exponential_jitter(initial=self.config.backoff_initial, max=self.config.backoff_max, jitter=self.config.backoff_initial),
            stop=stop,
            sleep=asyncio.sleep if attempts else self._sleep,
            before_sleep=lambda state: logger.warning("%s; retrying in %.1f s", state.outcome.exception(), state.next_action.sleep),
            reraise=True,
        )

    async def _call(self, function, /, *, attempts: int | None = None, **kwargs):
        async for attempt in self._retrying(attempts=attempts):
            with attempt:
                return await function(**kwargs)

    # -- life ---------------------------------------------------------------------------------
    async def run(self) -> int:
        """Run until stopped; return the exit code."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signum, self.stop)
        heartbeat: asyncio.Task | None = None
        try:
            fresh = await self._start()
            heartbeat = asyncio.create_task(self._heartbeat_loop())
            return await self._claim_loop(fresh_key=fresh)
        except (Stopped, asyncio.CancelledError):
            return EXIT_OK
        except Transient as exc:
            if self.stopping.is_set():
                return EXIT_OK
            logger.error("giving up: %s", exc)
            return EXIT_FATAL
        except Fatal as exc:
            logger.error("the server refused this runner: %s", exc)
            return EXIT_FATAL
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await heartbeat
            await self.client.close()
            if self.inference is not None:
                await self.inference.close()
            logger.info("stopped")

    async def _start(self) -> bool:
        """Register (or re-link) the machine and load or mint its key; return True if minted."""
        config = self.config
        target = await self._call(
            self.client.register, label=config.label, kind=config.kind, host=config.host or machine.hostname(),
            spec={**machine.spec(), "sandbox": self.sandbox.name if self.sandbox else MachineSandbox.UNAVAILABLE}, metrics=machine.metrics(),
        )
        self.target_id = target["id"]
        logger.info("registered machine %s (%s) with %s", self.target_id, target.get("label"), config.server)
        directory = config.key_dir or keyfile.default_dir()
        self.key_path = keyfile.key_path(directory, server=config.server, target_id=self.target_id)
        loaded = keyfile.load(self.key_path, server=config.server, target_id=self.target_id)
        if loaded:
            self.key = loaded
            logger.info("claim key loaded from %s", self.key_path)
            return False
        await self._mint()
        return True

    async def _mint(self) -> None:
        self.key = await self._call(self.client.mint_key, target_id=self.target_id)
        keyfile.save(self.key_path, server=self.config.server, target_id=self.target_id, key=self.key)
        logger.info("claim key minted and saved to %s (mode 0600)", self.key_path)

    async def _heartbeat_loop(self) -> None:
        while not self.stopping.is_set():
            try:
                await self._sleep(self.config.heartbeat_seconds)
            except Stopped:
                return
            try:
                await self.client.heartbeat(target_id=self.target_id, metrics=machine.metrics())
            except Transient as exc:
                logger.warning("heartbeat failed: %s", exc)
            except Fatal as exc:
                logger.error("heartbeat refused: %s", exc)

    async def _claim_loop(self, *, fresh_key: bool) -> int:
        reminted = fresh_key
        while not self.stopping.is_set():
            self._claim_task = asyncio.create_task(self._call(self.client.claim, target_id=self.target_id, key=self.key))
            try:
                body = await self._claim_task
            except (asyncio.CancelledError, Stopped):
                if self.stopping.is_set():
                    return EXIT_OK
                raise
            except ClaimRefused as exc:
                if not reminted:  # a key file from an older registration: mint once and go on
                    logger.warning("the saved claim key was refused (%s); minting a new one", exc)
                    reminted = True
                    await self._mint()
                    continue
                logger.error("claim refused (%s): the key was rotated by another daemon or the machine was removed", exc)
                return EXIT_SUPERSEDED
            finally:
                self._claim_task = None
            reminted = True
            if body is not None:
                await self._serve(body)
        return EXIT_OK

    async def _serve(self, body: dict) -> None:
        """Execute one claimed run and report it (as an error if it cannot finish)."""
        run = RoutedRun.parse(body)
        coding = body.get("kind") == CODING_KIND
        if run.resume is not None:
            logger.info("claimed run %s (agent %s), resumed after its approvals were answered", run.run_id, run.agent_name)
        elif coding:
            logger.info("claimed run %s (coding %s)", run.run_id, body.get("repo"))
        else:
            logger.info("claimed run %s (agent %s)", run.run_id, run.agent_name)
        if coding:
            execution = CodingExecution(body, server=self.client, inference=self.inference, stopping=self.stopping, sandbox=self.sandbox,
                                        model_override=self.config.model_override, work_dir=self.config.coding_work_dir)
        else:
            execution = Execution(run, server=self.client, inference=self.inference, tools=self.tools, stopping=self.stopping,
                                  model_override=self.config.model_override)
        task = asyncio.create_task(execution.execute())
        stop_wait = asyncio.create_task(self.stopping.wait())
        await asyncio.wait({task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():  # stopping: let the run end at its next step, then cut it short
            done, _ = await asyncio.wait({task}, timeout=self.config.stop_grace)
            if not done:
                task.cancel()
        stop_wait.cancel()
        report = await task if coding else {**await task, **await gitinfo.describe(self.config.shell_root)}
        try:
            delivered = await self._call(self.client.report, attempts=6, target_id=self.target_id, run_id=run.run_id, key=self.key, result=report)
            logger.info("reported run %s: %s%s", run.run_id, report["status"], "" if delivered else " (already settled)")
        except (Transient, Stopped) as exc:
            logger.error("run %s could not be reported: %s", run.run_id, exc)
        except (ClaimRefused, Fatal) as exc:
            logger.error("run %s report refused: %s", run.run_id, exc)
