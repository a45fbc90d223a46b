"""Commands with NO sandbox — only on a machine whose owner allowed it.

Used only when the machine's owner started the runner with `--allow-unsandboxed-commands` on
a machine without bubblewrap (the target's spec then shows `"sandbox": "none"`). `/bin/sh -c`
in the working copy, a scrubbed environment (PATH, LANG, TERM, HOME and TMPDIR in the working
copy), CPU/memory/file-size limits when `prlimit` exists, the wall-clock timeout and the output
limit (the process group is killed), and cancellation killing the group as every backend does.
The command can reach the network and the machine's files: the owner accepted that.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from toolkit.sandbox.backends.base import Invocation, Limits, SandboxBackend, prlimit_argv
from toolkit.wire import MachineSandbox


class UnconfinedCommands(SandboxBackend):
    """Run commands unconfined in the working copy (the owner's explicit choice); always available."""

    name = MachineSandbox.NONE

    def available(self) -> bool:
        """Return True: nothing needs to be set up."""
        return True

    def invocation(self, command: str, *, workdir: Path, limits: Limits) -> Invocation:
        """Return `/bin/sh -c command` in `workdir` (under `prlimit` when present) with the scrubbed environment."""
        workdir = Path(workdir).resolve()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(workdir), "TMPDIR": str(workdir), "TERM": "dumb",
               "PYTHONDONTWRITEBYTECODE": "1"}
        argv = ["/bin/sh", "-c", command]
        prlimit = shutil.which("prlimit")
        if prlimit:
            argv = [*prlimit_argv(prlimit, limits), *argv]
        return Invocation(argv=argv, env=env, cwd=str(workdir))
