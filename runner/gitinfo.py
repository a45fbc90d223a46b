"""What a run changed in a git working copy: branch, commit and diffstat for the report.

When the shell's directory is a git work tree, the report of every run carries `branch` (the
checked-out branch), `commitSha` (HEAD), `changed` (the tree differs from HEAD, untracked files
included) and `diffstat` (`git diff --stat HEAD` plus the untracked files). Read-only: the
runner never commits or pushes on its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


async def _git(root: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "git", "-C", str(root), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), 10)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
        return 1, ""
    return process.returncode, output.decode(errors="replace").strip()


async def describe(root: Path | None) -> dict:
    """Return `{branch, commitSha, changed, diffstat}` for work tree `root`, or {} when it is none."""
    if root is None:
        return {}
    try:
        code, inside = await _git(root, "rev-parse", "--is-inside-work-tree")
    except OSError:  # no git on this machine
        return {}
    if code != 0 or inside != "true":
        return {}
    _, branch = await _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    code, head = await _git(root, "rev-parse", "HEAD")
    _, status = await _git(root, "status", "--porcelain", "--untracked-files=all")
    diffstat = ""
    if code == 0:
        _, diffstat = await _git(root, "diff", "--stat", "HEAD")
    untracked = [line[3:] for line in status.splitlines() if line.startswith("?? ")]
    if untracked:
        diffstat = "\n".join(filter(None, [diffstat, *(f" {name} (new, untracked)" for name in untracked)]))
    return {"branch": branch if branch != "HEAD" else "", "commitSha": head if code == 0 else "", "changed": bool(status), "diffstat": diffstat}
