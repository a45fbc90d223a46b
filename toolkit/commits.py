"""What a coding run's turn commits, and under which subject (issue 30 items 5 and 6).

One implementation for the server's coding engine (`coding.engine`) and a machine's routed
coding runs (`runner.coding`); Django-free. The caller runs git; this module decides.

After a turn that may have changed files the caller runs `git <STATUS_ARGS>` (porcelain v1,
NUL-separated, untracked files one by one, `.gitignore` honoured by git itself) and hands the
output to `plan_turn`, which returns a `TurnPlan`:

- **by-products never staged**: an untracked path under `__pycache__/`, `.pytest_cache/`,
  `node_modules/`, `.venv/`, … or named `*.pyc`, `.coverage`, … is left out (a path the
  repository already tracks is staged as usual);
- **links resolving outside the working copy never committed**: such a link is left out and
  the model is told (`TurnPlan.notes`), the rest of the turn is committed;
- **bounded commits**: a file over `Bounds.max_file_bytes`, or a turn whose files would take
  the run's committed bytes past `Bounds.max_push_bytes`, makes the whole turn *not committed*
  (`TurnPlan.refusal` says which files and why, for the model, so it can fix it next turn);
- the staged paths (`TurnPlan.stage`) go to `git <stage_args(chunk)>` in chunks;
- a `finish` in a turn held back whole is not the end of the run: the model is told
  (`FINISH_HELD`) and gets the next turn to fix it.

`commit_subject` picks the commit's subject: the model's own text of that turn (its reply's
first line, else its `finish` summary's first line) when it wrote one, else a summary of the
turn's file changes ("Add tests/test_calc.py; update calc.py") — never a shell command line.
A recorded commit is never amended or rewritten.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SUBJECT_CHARS = 72
#: Told to the model when it called `finish` in a turn whose changes were held back whole.
FINISH_HELD = ("Your finish was not accepted: this turn's changes were not committed (see above). "
               "Fix what was refused, then call finish again.")
MIB = 1024 * 1024
STATUS_ARGS = ("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all")
STAGE_CHUNK = 200

#: Directory names whose untracked contents are build or tool by-products.
BY_PRODUCT_DIRS = frozenset({
    "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".tox", ".nox", ".eggs",
    "node_modules", ".venv", ".parcel-cache", ".next", ".nuxt", ".gradle", ".ipynb_checkpoints", ".sass-cache",
})
#: File names (exact) and suffixes of untracked by-products.
BY_PRODUCT_NAMES = frozenset({".coverage", ".DS_Store", "Thumbs.db"})
BY_PRODUCT_SUFFIXES = (".pyc", ".pyo", ".egg-info")


@dataclass(frozen=True)
class Bounds:
    """A run's commit bounds in bytes: one file, all files its commits add, the working copy."""

    max_file_bytes: int = 10 * MIB
    max_push_bytes: int = 50 * MIB
    max_tree_bytes: int = 200 * MIB

    @classmethod
    def from_mb(cls, *, file_mb: int, push_mb: int, tree_mb: int) -> Bounds:
        """Return bounds from MiB figures (each at least 1)."""
        return cls(max(file_mb, 1) * MIB, max(push_mb, 1) * MIB, max(tree_mb, 1) * MIB)

    def as_wire(self) -> dict:
        """Return `{maxFileMb, maxPushMb, maxRepoMb}` (what a routed claim carries)."""
        return {"maxFileMb": self.max_file_bytes // MIB, "maxPushMb": self.max_push_bytes // MIB, "maxRepoMb": self.max_tree_bytes // MIB}

    @classmethod
    def from_wire(cls, body: object) -> Bounds:
        """Return bounds from a claim's `limits` object (defaults for what is missing or invalid)."""
        body = body if isinstance(body, dict) else {}
        default = cls()

        def mb(key: str, fallback: int) -> int:
            value = body.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else fallback // MIB

        return cls.from_mb(file_mb=mb("maxFileMb", default.max_file_bytes), push_mb=mb("maxPushMb", default.max_push_bytes),
                           tree_mb=mb("maxRepoMb", default.max_tree_bytes))


@dataclass(frozen=True)
class Change:
    """One path `git status` reported: its two-letter code and whether git already tracks it."""

    path: str
    code: str

    @property
    def tracked(self) -> bool:
        return self.code not in ("??", "!!")

    @property
    def deleted(self) -> bool:
        return "D" in self.code


@dataclass
class TurnPlan:
    """What to stage for one turn, what was left out and why (sizes in bytes)."""

    stage: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    by_products: list[str] = field(default_factory=list)
    outside_links: list[tuple[str, str]] = field(default_factory=list)
    too_large: list[tuple[str, int]] = field(default_factory=list)
    bytes: int = 0
    over_push: bool = False
    bounds: Bounds = field(default_factory=Bounds)
    pushed_before: int = 0
    sizes: list[tuple[str, int]] = field(default_factory=list, repr=False)

    @property
    def committable(self) -> bool:
        """True when the turn has something to stage and no bound refuses it."""
        return bool(self.stage) and not self.refusal

    @property
    def refusal(self) -> str:
        """Return why the turn is not committed (for the model), "" when it may be."""
        reasons = []
        if self.too_large:
            listed = ", ".join(f"{path} ({_mib(size)})" for path, size in self.too_large[:10])
            reasons.append(f"{len(self.too_large)} file(s) exceed the {_mib(self.bounds.max_file_bytes)} per-file limit: {listed}")
        if self.over_push:
            reasons.append(
                f"the turn's files ({_mib(self.bytes)}) would take this run's commits past its "
                f"{_mib(self.bounds.max_push_bytes)} push limit ({_mib(self.pushed_before)} already committed); largest: "
                + ", ".join(f"{p} ({_mib(s)})" for p, s in self._largest()))
        if not reasons:
            return ""
        return ("The platform did not commit this turn: " + "; ".join(reasons) + ". Nothing of this turn was committed; "
                "delete those files, make them smaller or list them in .gitignore, and the next turn's changes are committed.")

    @property
    def notes(self) -> str:
        """Return what the model should know about paths left out of a committed turn ("" for nothing)."""
        if not self.outside_links:
            return ""
        listed = ", ".join(f"{path} -> {target}" for path, target in self.outside_links[:10])
        return (f"The platform left {len(self.outside_links)} symbolic link(s) out of the commit because they point outside "
                f"the working copy: {listed}. Such links are never committed; remove them or point them inside the repository.")

    def _largest(self) -> list[tuple[str, int]]:
        return sorted(self.sizes, key=lambda item: -item[1])[:5]


def _mib(size: int) -> str:
    return f"{size / MIB:.1f} MiB"


def parse_status(output: str | bytes) -> list[Change]:
    """Return the changes of `git status --porcelain=v1 -z --no-renames` output (`STATUS_ARGS`)."""
    text = output.decode("utf-8", errors="surrogateescape") if isinstance(output, bytes) else output
    changes = []
    for entry in text.split("\x00"):
        if len(entry) > 3 and entry[2] == " ":
            changes.append(Change(path=entry[3:], code=entry[:2]))
    return changes


def is_by_product(path: str) -> bool:
    """Return True when `path` (relative, `/`-separated) is a common build or tool by-product.

    Example: `pkg/__pycache__/m.cpython-311.pyc` → True; `node_modules/x/index.js` → True;
    `src/app.py` → False.
    """
    parts = path.split("/")
    if any(part in BY_PRODUCT_DIRS or part.endswith(".egg-info") for part in parts[:-1]):
        return True
    name = parts[-1]
    return name in BY_PRODUCT_NAMES or name.endswith(BY_PRODUCT_SUFFIXES)


def link_outside(root: Path, path: str) -> str:
    """Return the target of link `path` when it resolves outside `root` ("" for a link inside or no link).

    Example: `etc -> /etc` → "/etc"; `up -> ../..` → "../.."; `docs/l -> ../README.md` → "".
    """
    full = Path(root) / path
    try:
        target = os.readlink(full)
    except OSError:
        return ""
    real_root = os.path.realpath(root)
    resolved = os.path.realpath(full)
    if resolved == real_root or resolved.startswith(real_root + os.sep):
        return ""
    return target


def plan_turn(status_output: str | bytes, root: Path, *, bounds: Bounds, pushed_bytes: int = 0) -> TurnPlan:
    """Decide what one turn commits from `git status` output (`STATUS_ARGS`) over working copy `root`.

    `pushed_bytes` is what the run's earlier commits added (bytes). Returns the `TurnPlan`
    (read `committable`, `refusal`, `notes`, `stage`); never raises for a vanished file.
    """
    plan = TurnPlan(bounds=bounds, pushed_before=pushed_bytes)
    for change in parse_status(status_output):
        path = change.path
        if not change.tracked and is_by_product(path):
            plan.by_products.append(path)
            continue
        if change.deleted:
            plan.stage.append(path)
            plan.deleted.append(path)
            continue
        try:
            info = os.lstat(Path(root) / path)
        except OSError:
            plan.stage.append(path)  # vanished since git looked: staging records what is there
            continue
        if os.path.islink(Path(root) / path):
            target = link_outside(root, path)
            if target:
                plan.outside_links.append((path, target))
                continue
        elif info.st_size > bounds.max_file_bytes:
            plan.too_large.append((path, info.st_size))
        plan.bytes += info.st_size
        plan.sizes.append((path, info.st_size))
        plan.stage.append(path)
        (plan.added if not change.tracked or "A" in change.code else plan.modified).append(path)
    plan.over_push = pushed_bytes + plan.bytes > bounds.max_push_bytes
    return plan


def stage_args(paths: list[str]) -> tuple[str, ...]:
    """Return the git arguments staging exactly `paths` (additions, changes and deletions; no pathspec magic)."""
    return ("--literal-pathspecs", "add", "-A", "--", *paths)


def chunks(paths: list[str], size: int = STAGE_CHUNK) -> list[list[str]]:
    """Return `paths` cut in lists of at most `size` (one git command each)."""
    return [paths[i:i + size] for i in range(0, len(paths), size)]


def first_line(text: object) -> str:
    """Return the first non-empty prose line of `text`, at most 72 characters ("" for none).

    Markdown heading marks are dropped; fenced code blocks (```…```) are skipped whole, so a
    reply that opens with a shell snippet never titles a commit with a command line.
    """
    fenced = False
    for line in (text if isinstance(text, str) else "").splitlines():
        line = line.strip()
        if line.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        line = line.lstrip("#").strip()
        if line and not fenced:
            return line[:SUBJECT_CHARS]
    return ""


def _names(verb: str, paths: list[str]) -> str:
    if not paths:
        return ""
    shown = ", ".join(paths[:3])
    return f"{verb} {shown}" + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def changes_subject(plan: TurnPlan) -> str:
    """Return a subject summarising the turn's file changes, e.g. "Add tests/test_add.py; update README.md"."""
    parts = [p for p in (_names("add", plan.added), _names("update", plan.modified), _names("delete", plan.deleted)) if p]
    text = "; ".join(parts) or "update files"
    text = text[0].upper() + text[1:]
    return text if len(text) <= SUBJECT_CHARS else text[:SUBJECT_CHARS - 1] + "…"


def commit_subject(*, content: str, finished: str | None, plan: TurnPlan) -> str:
    """Return the subject of the turn's commit: the model's words for it, else `changes_subject`.

    `content` is the model's reply text of that turn; `finished` the `finish` summary when the
    turn called it (None otherwise). Tool arguments (a shell command line) never make a subject.
    """
    return first_line(content) or first_line(finished) or changes_subject(plan)


def tree_bytes(path: Path) -> int:
    """Return the bytes used by the files under `path`, `.git` excluded (links not followed)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def tree_warning(size: int, bounds: Bounds) -> str:
    """Return the message telling the model the working copy is over its cap ("" when within it)."""
    if size <= bounds.max_tree_bytes:
        return ""
    return (f"The working copy now holds {_mib(size)}, over the {_mib(bounds.max_tree_bytes)} a coding run may use. "
            "Nothing of this turn was committed. Delete the large files you made in your next turn, or the run is ended.")
