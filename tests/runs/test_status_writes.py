"""A run's status is written only by `runs.lifecycle` (issue 48 item 1; DESIGN §13 "one owner of run transitions").

Start (`run_start`), a worker taking a queued run (`run_mark_running`), suspension for approval
(`run_mark_waiting`), resumption (`run_mark_resumed`) and the finish (`run_finish`) are the
transitions; each is one conditional UPDATE in `runs/queries.py`. This test reads every
first-party module (the repository's Python files outside `tests/`, `.venv/` and hidden
directories; migrations included) and fails on a write of a run's status anywhere else.

Counting rule (static, by the module's AST; `Run` is any name the module binds to
`runs.models.Run` — `from runs.models import Run [as X]`, or `X.Run` after `import runs.models as X` /
`from runs import models as X`):

1. a call of `update`, `create`, `get_or_create`, `update_or_create`, `bulk_create` or `bulk_update`
   on a chain rooted at `Run` (`Run.objects.filter(…).update(…)`) that passes `status=`, a
   `defaults`/`create_defaults` dict with a `"status"` key, `**kwargs` (could carry it),
   `bulk_create` at all, or `bulk_update` naming `"status"`;
2. `Run(…)` with a `status=` keyword (a run row built to be inserted);
3. an assignment to `<name>.status` (or `setattr(<name>, "status", …)`) where `<name>` is a
   parameter annotated `Run` or was assigned from an expression rooted at `Run` in the same
   function (then a `save()` writes it);
4. SQL text (a string or f-string, docstrings aside) holding `UPDATE` or `INSERT` together with `agents_run` (the
   runs table) or a call `table_name(Run, …)`;
5. any use of `runs.queries`' status writers `run_move`, `run_outcome`, `run_insert`.

Reads (`filter(status=…)`, `.first()`, `.exists()`) and writes of other models (`RoutedRun`,
`Approval`, a session's status) are not writes of a run's status. The allowed modules are
`runs/lifecycle.py` and `runs/queries.py`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"runs/lifecycle.py", "runs/queries.py"}
WRITE_METHODS = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "bulk_update"}
STATUS_WRITERS = {"run_move", "run_outcome", "run_insert"}
RUNS_TABLE = "agents_run"


def first_party_modules() -> list[Path]:
    """Every Python file of the repository outside `tests/`, `.venv/` and hidden directories."""
    found = []
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).parts
        if parts[0] in {"tests", "node_modules"} or any(part.startswith(".") for part in parts):
            continue
        found.append(path)
    return sorted(found)


class _RunNames(ast.NodeVisitor):
    """The names a module binds to `runs.models.Run` (`run_names`) and to the `runs.models` module (`module_names`)."""

    def __init__(self) -> None:
        self.run_names: set[str] = set()
        self.module_names: set[str] = set()
        self.writer_names: set[str] = set()  # runs.queries' status writers imported by name
        self.queries_names: set[str] = set()  # the `runs.queries` module

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            local = alias.asname or alias.name
            if node.module == "runs.models" and alias.name == "Run":
                self.run_names.add(local)
            elif node.module == "runs" and alias.name == "models":
                self.module_names.add(local)
            elif node.module == "runs.queries" and alias.name in STATUS_WRITERS:
                self.writer_names.add(local)
            elif node.module == "runs" and alias.name == "queries":
                self.queries_names.add(local)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "runs.models":
                self.module_names.add(alias.asname or "runs.models")
            elif alias.name == "runs.queries":
                self.queries_names.add(alias.asname or "runs.queries")


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a Name/Attribute chain, "" otherwise."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


class _Checker(ast.NodeVisitor):
    def __init__(self, names: _RunNames) -> None:
        self.names = names
        self.found: list[tuple[int, str]] = []
        self.run_vars: list[set[str]] = [set()]  # per function scope: names holding a Run

    # -- what refers to a Run -----------------------------------------------------------------

    def _is_run(self, node: ast.AST) -> bool:
        dotted = _dotted(node)
        if dotted in self.names.run_names:
            return True
        return any(dotted == f"{module}.Run" for module in self.names.module_names)

    def _rooted_at_run(self, node: ast.AST) -> bool:
        """True when the chain `node` (calls, attributes, subscripts) starts at `Run`."""
        while True:
            if self._is_run(node):
                return True
            if isinstance(node, ast.Call):
                node = node.func
            elif isinstance(node, (ast.Attribute, ast.Subscript)):
                node = node.value
            else:
                return False

    def _note(self, node: ast.AST, what: str) -> None:
        self.found.append((node.lineno, what))

    # -- scopes -------------------------------------------------------------------------------

    def _function(self, node) -> None:
        scope = set()
        for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]:
            if arg.annotation is not None and self._is_run(arg.annotation):
                scope.add(arg.arg)
        self.run_vars.append(scope)
        self.generic_visit(node)
        self.run_vars.pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Assign(self, node: ast.Assign) -> None:
        if self._rooted_at_run(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.run_vars[-1].add(target.id)
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if isinstance(node.target, ast.Name) and (self._is_run(node.annotation) or (node.value is not None and self._rooted_at_run(node.value))):
            self.run_vars[-1].add(node.target.id)
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_withitem(self, node: ast.withitem) -> None:
        if isinstance(node.optional_vars, ast.Name) and self._rooted_at_run(node.context_expr):
            self.run_vars[-1].add(node.optional_vars.id)
        self.generic_visit(node)

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Attribute) and target.attr == "status" and isinstance(target.value, ast.Name) \
                and target.value.id in self.run_vars[-1]:
            self._note(target, f"{target.value.id}.status assigned (a Run)")

    # -- calls and SQL ------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in WRITE_METHODS and self._rooted_at_run(func.value):
            if self._writes_status(func.attr, node):
                self._note(node, f"Run….{func.attr}(…) writes status")
        if self._is_run(func) and any(kw.arg == "status" or kw.arg is None for kw in node.keywords):
            self._note(node, "Run(status=…) built")
        if isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) \
                and node.args[0].id in self.run_vars[-1] and isinstance(node.args[1], ast.Constant) and node.args[1].value == "status":
            self._note(node, "setattr(run, 'status', …)")
        if isinstance(func, ast.Name) and func.id in self.names.writer_names:
            self._note(node, f"runs.queries.{func.id} called")
        if isinstance(func, ast.Attribute) and func.attr in STATUS_WRITERS and _dotted(func.value) in self.names.queries_names:
            self._note(node, f"runs.queries.{func.attr} called")
        self.generic_visit(node)

    def _writes_status(self, method: str, node: ast.Call) -> bool:
        if method == "bulk_create":
            return True
        if method == "bulk_update":
            fields = node.args[1] if len(node.args) > 1 else next((kw.value for kw in node.keywords if kw.arg == "fields"), None)
            return not isinstance(fields, (ast.List, ast.Tuple, ast.Set)) or any(
                isinstance(e, ast.Constant) and e.value == "status" for e in fields.elts)
        for kw in node.keywords:
            if kw.arg in ("status", None):
                return True
            if kw.arg in ("defaults", "create_defaults"):
                if not isinstance(kw.value, ast.Dict) or any(
                        k is None or (isinstance(k, ast.Constant) and k.value == "status") for k in kw.value.keys):
                    return True
        return False

    def _sql_text(self, node: ast.AST) -> tuple[str, bool]:
        """The literal text of a string or f-string, and whether it formats `table_name(Run, …)`."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value, False
        text, run_table = "", False
        for part in node.values:
            if isinstance(part, ast.Constant):
                text += str(part.value)
            elif isinstance(part, ast.FormattedValue):
                value = part.value
                if isinstance(value, ast.Call) and _dotted(value.func).endswith("table_name") and value.args \
                        and self._is_run(value.args[0]):
                    run_table = True
        return text, run_table

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._check_sql(node)
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring (or a bare string): prose, not SQL sent anywhere
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self._check_sql(node)

    def _check_sql(self, node: ast.AST) -> None:
        text, run_table = self._sql_text(node)
        upper = text.upper()
        if ("UPDATE " in upper or "INSERT " in upper) and (run_table or re.search(rf"\b{RUNS_TABLE}\b", text.lower())):
            self._note(node, "SQL writing the runs table")


def status_writes(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """Return `[(line, what)]`: the writes of a run's status in Python `source` (the rule above)."""
    tree = ast.parse(source, filename=filename)
    names = _RunNames()
    names.visit(tree)
    checker = _Checker(names)
    checker.visit(tree)
    return sorted(checker.found)


def test_no_module_but_the_lifecycle_writes_a_runs_status():
    modules = first_party_modules()
    assert len(modules) > 200  # the whole tree was read (a moved root would pass vacuously)
    outside = {}
    for path in modules:
        relative = path.relative_to(ROOT).as_posix()
        if relative in ALLOWED:
            continue
        found = status_writes(path.read_text(), relative)
        if found:
            outside[relative] = found
    assert outside == {}, "a run's status is written outside runs.lifecycle: add a transition there instead"


def test_the_rule_sees_the_lifecycles_own_writes():
    """Not vacuous: the allowed modules' transitions are what the rule counts."""
    lifecycle = status_writes((ROOT / "runs/lifecycle.py").read_text())
    queries = status_writes((ROOT / "runs/queries.py").read_text())
    assert any("run_move" in what for _, what in lifecycle)  # run_mark_running / _waiting / _resumed
    assert any("run_outcome" in what for _, what in lifecycle)  # run_finish
    assert any("Run(status=" in what for _, what in lifecycle)  # the new row
    assert any("SQL" in what for _, what in queries)


@pytest.mark.parametrize("source", [
    # 1. a queryset write
    "from runs.models import Run\nRun.objects.filter(pk=1, status='running').update(status='waiting')\n",
    "from runs.models import Run as R\nR.objects.filter(pk=1).update(**changes)\n",
    "from runs.models import Run\nRun.objects.update_or_create(pk=1, defaults={'status': 'ok'})\n",
    "from runs.models import Run\nRun.objects.create(id='r', status='ok')\n",
    "from runs.models import Run\nRun.objects.bulk_update(rows, ['status'])\n",
    "from runs import models\nmodels.Run.objects.filter(pk=1).update(status='ok')\n",
    "import runs.models\nruns.models.Run.objects.filter(pk=1).update(status='ok')\n",
    # 2. a new row
    "from runs.models import Run\nrow = Run(id='r', status='queued')\n",
    # 3. an attribute then saved
    "from runs.models import Run\ndef f(run_id):\n    run = Run.objects.get(pk=run_id)\n    run.status = 'ok'\n    run.save()\n",
    "from runs.models import Run\ndef f(run: Run):\n    run.status = 'ok'\n",
    "from runs.models import Run\ndef f(run_id):\n    run = Run.objects.get(pk=run_id)\n    setattr(run, 'status', 'ok')\n",
    # 4. SQL
    "def f(c):\n    c.execute(\"UPDATE agents_run SET status = 'ok' WHERE id = %s\", [1])\n",
    "from runs.models import Run\ndef f(c, connection):\n    c.execute(f'UPDATE {sql.table_name(Run, connection)} SET status = %s', ['ok'])\n",
    # 5. the lifecycle's own statements, called from elsewhere
    "from runs import queries\nqueries.run_move('r', to='running', from_statuses=set(), alias='x')\n",
    "from runs.queries import run_outcome\nrun_outcome('r', {}, from_statuses=set(), alias='x')\n",
])
def test_the_rule_catches_each_kind_of_status_write(source):
    assert status_writes(source)


@pytest.mark.parametrize("source", [
    "from runs.models import Run\nRun.objects.filter(status='running').count()\n",
    "from runs.models import Run\nRun.objects.filter(pk=1).update(session_id='s')\n",
    "from targets.models import RoutedRun\nRoutedRun.objects.filter(pk=1).update(state='offered')\n",
    "from runs.models import Approval\nApproval.objects.filter(pk=1).update(state='done')\n",
    "def f(outcome):\n    outcome.status = 'ok'\n",
    "from runs.lifecycle import run_mark_waiting\nrun_mark_waiting(run_id='r')\n",
])
def test_the_rule_leaves_reads_and_other_models_alone(source):
    assert status_writes(source) == []
