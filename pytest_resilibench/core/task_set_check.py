"""A task set is checked by its content, not only by its hashes (docs/ARCHITECTURE.md,
"Fixtures"). A manifest that matches its files proves nothing about them: anyone may edit a file
and hash it again. So as a set loads, every file is checked against its published JSON Schema
(`task_set_schemas.py`) and every reference plan is replayed against the tool registry: known
tools, not empty, arguments valid for the tool, task-bound values the task's own, every
required tool in it; bounds finite, in [0, 1] and ordered; ids unique; `total` and `counts`
true; the manifest's paths inside the folder; the solver report present and well formed; the
realistic plans, where the set stores them, at most one per task and replayed like the
reference plans (known tools with valid arguments, the task's own values, its steps in order).

Every problem is named by file, line (of a JSON-lines record) and field, and all of them come
in one `FixtureError` (the first `MAX_LISTED`, then how many more), raised before any task is
built: the plugin turns it into a usage error at start-up.

Checking 5040 tasks and their plans costs about 2.5 s of CPU (bench/bench_task_set_check.py),
so a verdict is kept by the sha256 of what was checked: the shipped sets' are written here
(`SHIPPED_SOUND`, which tests/unit/test_task_set_check.py recomputes), any other set's is
remembered on disk once it passes (`base/checked.py`). The folder's paths are checked on every
load, memo or not.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any

from pytest_resilibench.base import checked
from pytest_resilibench.base.names import FLOW_PARAMS
from pytest_resilibench.core.fixture_files import MANIFEST, FixtureError
from pytest_resilibench.core.task_set_schemas import ID_PATTERN

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

    from pytest_resilibench.core.registry import ToolRegistry

__all__ = [
    "MAX_LISTED",
    "REALISTIC_FILE",
    "SHIPPED_SOUND",
    "SOLVER_REPORT",
    "Problem",
    "check_paths",
    "check_task_set",
    "content_problems",
    "data_key",
]

SOLVER_REPORT = "solver_report.json"
TASKS_FILE = "tasks.jsonl.gz"
WORKFLOWS_FILE = "workflows.jsonl.gz"
REALISTIC_FILE = "realistic_workflows.jsonl.gz"  # core/faults.py: REALISTIC_PLANS
MAX_LISTED = 20  # problems a message lists; the rest are counted
_REPORT_BYTES = 16 << 20  # a solver report is ~15 kB; anything near this is not one
_EPSILON = 1e-9  # the solver's own tolerance between bounds (solver/solve.py)
_ID = re.compile(ID_PATTERN)
# A row of a JSON-lines file, with its 1-based line number in the decompressed text.
Row = tuple[int, Mapping[str, Any]]

# The verdicts of the shipped sets (`data_key` of default and paper, complete and tasks-only):
# checked in full by tests/unit/test_task_set_check.py on every test run, which prints the
# keys to put here when a shipped file changes. A set whose key is not here is checked.
SHIPPED_SOUND = frozenset({
    "e47a19b8e01c2a2a1d9a513fdb382dade0a8b74bbcef754e3241b23a33a08839",  # default
    "2f314c351d2c6ea6c7a93ebe37e5b6cbf4d8b98d3cf32faef38343959df126fd",  # default, tasks-only
    "47f7c5d65261c16e2e658cdd56a77856923188dfbc4905a24eb1dec764d9a7d0",  # paper
    "62355d1a40604badd62854b1eea99f6e50db62bae3110bf20e606d2ce68d2cb9",  # paper, tasks-only
})


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a set: in which file, on which line (JSON lines), which field."""

    file: str
    field: str
    message: str
    line: int | None = None

    def render(self, directory: Path) -> str:
        where = f"{directory / self.file}"
        if self.line is not None:
            where += f", line {self.line}"
        if self.field:
            where += f", field {self.field}"
        # One line per problem, whatever a hostile file put in a value.
        return f"{where}: {self.message}".replace("\n", "\\n").replace("\r", "\\r")


def _fail(directory: Path, problems: Sequence[Problem]) -> None:
    if not problems:
        return
    total = len(problems)
    shown = [f"  {p.render(directory)}" for p in problems[:MAX_LISTED]]
    if total > len(shown):
        shown.append(f"  ... and {total - len(shown)} more")
    raise FixtureError(
        f"{directory} is not a sound task set ({total} problem{'s' * (total != 1)}; "
        "`resilibench schema tasks|workflows|realistic-workflows|manifest|solver-report` "
        "prints each file's "
        "schema):\n" + "\n".join(shown))


# --- the folder: what the manifest lists stays inside it ------------------------------------
def _name_problem(name: str) -> str | None:
    if not name or "\x00" in name or "\\" in name:
        return "not a file name"
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).anchor:
        return "an absolute path: a listed file must lie inside the set's folder"
    if ".." in PurePosixPath(name).parts:
        return "a path with '..': a listed file must lie inside the set's folder"
    return None


def _inside(directory: Path, path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def check_paths(directory: Path, manifest: Mapping[str, Any], *, complete: bool) -> None:
    """Every file the manifest lists, the tasks file and (for a complete set) the solver
    report lie inside the folder: no absolute path, no `..`, no symlink out; each listed file
    is there, a regular file of its listed size. Checked before any file is read."""
    directory = Path(directory)
    problems: list[Problem] = []
    files = manifest.get("files", {})
    for name, entry in (files.items() if isinstance(files, Mapping) else ()):
        field = f"files[{json.dumps(name)[:80]}]"
        why = _name_problem(name)
        path = directory / name
        if why is None and not _inside(directory, path):
            why = "a symlink out of the set's folder"
        if why is None and not path.is_file():
            why = ("not a regular file" if path.exists()
                   else "listed, but no such file in the set's folder")
        if why is None and isinstance(entry, Mapping) and isinstance(entry.get("bytes"), int) \
                and path.stat().st_size != entry["bytes"]:
            why = (f"{path.stat().st_size} bytes on disk, {entry['bytes']} listed: the file "
                   "was changed or damaged; regenerate it (`resilibench generate`/`solve`)")
        if why is not None:
            problems.append(Problem(MANIFEST, field, why))
    for name in (TASKS_FILE, *((SOLVER_REPORT,) if complete else ())):
        path = directory / name
        if (path.exists() or path.is_symlink()) and not _inside(directory, path):
            problems.append(Problem(name, "", "a symlink out of the set's folder"))
    _fail(directory, problems)


# --- the verdict's key ----------------------------------------------------------------------
def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def data_key(manifest_bytes: bytes, report_bytes: bytes | None, *, complete: bool,
             with_workflows: bool) -> str:
    """What a verdict stands for: the manifest's bytes (which hold the sha256 of every file
    read, verified before this), the solver report's, and what was loaded."""
    mode = "complete" if complete else ("tasks+workflows" if with_workflows else "tasks")
    text = json.dumps([mode, _sha(manifest_bytes), _sha(report_bytes)])
    return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1)
def _rules_digest() -> str:
    """The rules a verdict was reached under: this module, the schemas and the registry's
    tools (a stricter rule or another tool makes a remembered verdict stale)."""
    from pytest_resilibench.core import task_set_schemas
    from pytest_resilibench.core.registry import default_registry

    digest = hashlib.sha256()
    for source in (__file__, task_set_schemas.__file__):
        try:
            digest.update(Path(source).read_bytes())
        except OSError:  # run from bytecode alone: the package's version stands for them
            from pytest_resilibench import __version__

            digest.update(__version__.encode())
    tools = [tool.to_json() for tool in default_registry()]
    digest.update(json.dumps(tools, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _memo_key(key: str) -> str:
    return hashlib.sha256(f"{key}:{_rules_digest()}".encode()).hexdigest()


def _read_report(path: Path) -> tuple[bytes | None, Problem | None]:
    """The solver report's bytes, or the problem of reading them."""
    if not path.is_file():  # nor read a FIFO: it would wait forever
        what = "not a regular file" if path.exists() else "missing"
        return None, Problem(SOLVER_REPORT, "", f"{what}: `resilibench solve --exact "
                             f"--fixtures {path.parent} --out {path.parent}` writes it")
    try:
        if path.stat().st_size > _REPORT_BYTES:
            return None, Problem(SOLVER_REPORT, "", f"larger than {_REPORT_BYTES} bytes: not "
                                 "a solver report")
        return path.read_bytes(), None
    except OSError as exc:
        return None, Problem(SOLVER_REPORT, "", f"cannot be read ({exc.strerror or exc})")


def check_task_set(directory: Path, *, manifest: Mapping[str, Any], manifest_bytes: bytes,
                   tasks: Sequence[Row], workflows: Sequence[Row] | None,
                   complete: bool,
                   realistic: Callable[[], Sequence[Row]] | None = None) -> None:
    """Raise one `FixtureError` naming every problem of a loaded set's content (its files
    already read and matched to the manifest's sha256); nothing when it is sound. A complete
    set (what a run loads) needs its workflows and solver report; a tasks-only load (the
    solver, `serve-mcp --task`) checks what it read. `realistic` reads the stored realistic
    plans, only when the content is checked (a known verdict needs no file read)."""
    directory = Path(directory)
    report_bytes, report_problem = (_read_report(directory / SOLVER_REPORT) if complete
                                    else (None, None))
    key = data_key(manifest_bytes, report_bytes, complete=complete,
                   with_workflows=workflows is not None)
    if report_problem is None and key in SHIPPED_SOUND:
        return
    memo = _memo_key(key)
    if report_problem is None and checked.is_known("task-sets", memo):
        return
    _fail(directory, content_problems(manifest, tasks, workflows, report_bytes,
                                      report_problem,
                                      realistic=None if realistic is None else realistic()))
    checked.remember("task-sets", memo)


# --- content --------------------------------------------------------------------------------
def _field(path: Iterable[Any]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(part)):
            out += f".{part}" if out else str(part)
        else:
            out += f"[{json.dumps(str(part))[:80]}]"
    return out


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:
        return "a value nested too deep"
    return text if len(text) <= 80 else text[:77] + "..."


def _describe(error: ValidationError, tools: Sequence[str]) -> tuple[str, str]:
    """(field, message) of one schema error, worded for a person: an unknown tool is named as
    such, not with the 30 names it is not."""
    field = _field(error.absolute_path)
    kind, expected = error.validator, error.validator_value
    listed: list[Any] = list(expected) if isinstance(expected, list) else []
    if kind == "required":
        missing = re.match(r"^'(.*)' is a required property$", error.message)
        name = missing.group(1) if missing else "?"
        return _field([*error.absolute_path, name]), "missing"
    if kind == "enum" and listed == list(tools):
        return field, f"unknown tool {_short(error.instance)} (`resilibench tools` lists them)"
    if kind == "enum":
        return field, f"{_short(error.instance)} is not one of {', '.join(map(str, listed))}"
    if kind == "const":
        return field, f"{_short(error.instance)}, expected {expected!r}"
    if kind == "type":
        return field, f"{_short(error.instance)} is not of type {expected}"
    if kind == "propertyNames":
        return field, f"the key {_short(error.instance)} is not allowed here"
    message = error.message
    return field, message if len(message) <= 160 else message[:157] + "..."


def _non_finite(value: Any) -> Iterator[tuple[list[Any], float]]:
    """Every NaN or infinite number in a JSON value, with its path (json reads `NaN`,
    `Infinity` and `1e999`; JSON Schema's `number` lets NaN through every bound)."""
    stack: list[tuple[list[Any], Any]] = [([], value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            yield path, node
        elif isinstance(node, Mapping):
            stack.extend(([*path, k], v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(([*path, i], v) for i, v in enumerate(node))


class _Checker:
    """The checks of one set's content; `problems` collects what they find."""

    def __init__(self, registry: ToolRegistry) -> None:
        from jsonschema import Draft202012Validator

        from pytest_resilibench.core import task_set_schemas as schemas

        self.registry = registry
        self.tools = list(registry.names)
        self.validators: dict[str, Draft202012Validator] = {
            TASKS_FILE: Draft202012Validator(schemas.task_schema(self.tools)),
            WORKFLOWS_FILE: Draft202012Validator(schemas.workflow_schema(self.tools)),
            MANIFEST: Draft202012Validator(schemas.manifest_schema()),
            SOLVER_REPORT: Draft202012Validator(schemas.solver_report_schema()),
            REALISTIC_FILE: Draft202012Validator(schemas.realistic_workflow_schema(self.tools)),
        }
        self.problems: list[Problem] = []
        self.ids: set[str] = set()  # every task id of the tasks file, sound or not

    def add(self, file: str, field: str, message: str, line: int | None = None) -> None:
        self.problems.append(Problem(file, field, message, line))

    def against_schema(self, file: str, value: Any, line: int | None = None) -> bool:
        """Add the value's schema errors and non-finite numbers; whether it has none."""
        before = len(self.problems)
        try:
            for error in self.validators[file].iter_errors(value):
                self.add(file, *_describe(error, self.tools), line)
        except RecursionError:  # jsonschema words its messages with repr()
            self.add(file, "", "nested too deep to check", line)
        try:  # the C encoder finds a NaN at once; the walk only names where it is
            json.dumps(value, allow_nan=False)
        except ValueError:
            for path, number in _non_finite(value):
                self.add(file, _field(path), f"{number} is not a finite number", line)
        except (TypeError, RecursionError):
            pass  # not JSON-able can't happen for parsed JSON; nesting is the schema's problem
        return len(self.problems) == before

    # tasks.jsonl.gz
    def tasks(self, rows: Sequence[Row]) -> dict[str, Mapping[str, Any]]:
        """Check the task rows; the sound ones by id."""
        sound: dict[str, Mapping[str, Any]] = {}
        first: dict[str, int] = {}
        for line, row in rows:
            ok = self.against_schema(TASKS_FILE, row, line)
            task_id = row.get("id")
            if isinstance(task_id, str) and _ID.match(task_id):  # else named by the schema
                if task_id in first:
                    self.add(TASKS_FILE, "id", f"{task_id} again (first on line "
                             f"{first[task_id]})", line)
                    continue
                first[task_id] = line
            if ok and self.task(row, line):
                sound[row["id"]] = row
        self.ids = set(first)
        return sound

    def _bound(self, file: str, field: str, arguments: Mapping[str, Any],
               inputs: Mapping[str, Any], line: int) -> None:
        """A task-bound value (a key of the task's inputs) must be the task's own."""
        for key, value in arguments.items():
            if key in inputs and key not in FLOW_PARAMS and value != inputs[key]:
                self.add(file, f"{field}.{key}", f"{_short(value)} is not the task's {key} "
                         f"({_short(inputs[key])})", line)

    def task(self, row: Mapping[str, Any], line: int) -> bool:
        before = len(self.problems)
        inputs = row["inputs"]
        for i, key in enumerate(row.get("worded", ())):
            if key not in inputs:
                self.add(TASKS_FILE, f"worded[{i}]", f"{key!r} is not a key of inputs", line)
        closure = set(self.registry.closure(row["required_tools"]))
        for tool, arguments in row["step_arguments"].items():
            field = _field(["step_arguments", tool])
            if tool not in closure:
                self.add(TASKS_FILE, field, f"{tool} is neither a required tool of the task "
                         "nor a prerequisite of one", line)
            for error in self.registry.argument_errors(tool, arguments):
                self.add(TASKS_FILE, field, error, line)
            self._bound(TASKS_FILE, field, arguments, inputs, line)
        return len(self.problems) == before

    # workflows.jsonl.gz
    def workflows(self, rows: Sequence[Row], tasks: Mapping[str, Mapping[str, Any]]) -> None:
        seen: set[str] = set()
        for line, row, task in self._plan_rows(WORKFLOWS_FILE, rows, tasks, seen):
            if task is not None:
                self.plan(row, task, line)
            self.bounds(row["bounds"], line)
        missing = sorted(self.ids - seen)
        if missing:
            self.add(WORKFLOWS_FILE, "task_id", f"no row for {len(missing)} task"
                     f"{'s' * (len(missing) != 1)} (e.g. {', '.join(missing[:3])}); solve "
                     "the tasks again")

    def _plan_rows(self, file: str, rows: Sequence[Row], tasks: Mapping[str, Mapping[str, Any]],
                   seen: set[str]) -> Iterator[tuple[int, Mapping[str, Any],
                                                     Mapping[str, Any] | None]]:
        """The rows of a file of plans (one per task at most, each id put in `seen`) that pass
        its schema, with their sound task (None where there is none); a second row for a task
        and a row for no task of the set are problems named here."""
        first: dict[str, int] = {}
        for line, row in rows:
            ok = self.against_schema(file, row, line)
            task_id = row.get("task_id")
            if not (isinstance(task_id, str) and _ID.match(task_id)):
                continue  # named by the schema
            if task_id in first:
                self.add(file, "task_id", f"a second row for {task_id} (first on "
                         f"line {first[task_id]})", line)
                continue
            first[task_id] = line
            seen.add(task_id)
            if not ok:
                continue
            if task_id not in self.ids:
                self.add(file, "task_id", f"no task {task_id} in {TASKS_FILE}", line)
            yield line, row, tasks.get(task_id)

    def plan(self, row: Mapping[str, Any], task: Mapping[str, Any], line: int) -> None:
        """Replay the reference plan against the registry and its task."""
        steps = row["optimal"]["steps"]
        required = task["required_tools"]
        closure = set(self.registry.closure(required))
        for i, step in enumerate(steps):
            field = f"optimal.steps[{i}]"
            if step["tool"] not in closure:
                self.add(WORKFLOWS_FILE, f"{field}.tool", f"{step['tool']} is neither a "
                         f"required tool of {task['id']} nor a prerequisite of one", line)
            for error in self.registry.argument_errors(step["tool"], step["arguments"]):
                self.add(WORKFLOWS_FILE, f"{field}.arguments", error, line)
            self._bound(WORKFLOWS_FILE, f"{field}.arguments", step["arguments"],
                        task["inputs"], line)
        tools = [step["tool"] for step in steps]
        left_out = [tool for tool in dict.fromkeys(required) if tool not in tools]
        if left_out:
            self.add(WORKFLOWS_FILE, "optimal.steps", f"leaves out required tools {left_out} "
                     f"of {task['id']}", line)
        if row["differs_from_naive"] != (tuple(tools) != tuple(required)):
            self.add(WORKFLOWS_FILE, "differs_from_naive", f"{row['differs_from_naive']}, "
                     "but the plan's tools say otherwise", line)

    # realistic_workflows.jsonl.gz
    def realistic(self, rows: Sequence[Row], tasks: Mapping[str, Mapping[str, Any]]) -> None:
        """At most one plan per task (a task without one has its plan solved at run time),
        each replayed: its tools' arguments valid and the task's own, the task's steps in
        order (what `realistic_plans` checks before using one)."""
        for line, row, task in self._plan_rows(REALISTIC_FILE, rows, tasks, set()):
            if task is not None:
                self.realistic_plan(row, task, line)

    def realistic_plan(self, row: Mapping[str, Any], task: Mapping[str, Any],
                       line: int) -> None:
        steps = row["optimal"]["steps"]
        for i, step in enumerate(steps):
            field = f"optimal.steps[{i}].arguments"
            for error in self.registry.argument_errors(step["tool"], step["arguments"]):
                self.add(REALISTIC_FILE, field, error, line)
            self._bound(REALISTIC_FILE, field, step["arguments"], task["inputs"], line)
        required = list(task["required_tools"])
        if [step["tool"] for step in steps if step["tool"] in required] != required:
            self.add(REALISTIC_FILE, "optimal.steps", f"does not call the steps of "
                     f"{task['id']} in order ({required})", line)

    def bounds(self, bounds: Mapping[str, float], line: int) -> None:
        if bounds["naive"] > bounds["dp"] + _EPSILON:
            self.add(WORKFLOWS_FILE, "bounds.naive", f"{bounds['naive']} exceeds the optimum "
                     f"dp {bounds['dp']}", line)
        if "ppo" in bounds and bounds["ppo"] > bounds["dp"] + _EPSILON:
            self.add(WORKFLOWS_FILE, "bounds.ppo", f"{bounds['ppo']} exceeds the optimum "
                     f"dp {bounds['dp']}", line)

    # manifest.json
    def manifest(self, manifest: Mapping[str, Any], rows: Sequence[Row]) -> None:
        if not self.against_schema(MANIFEST, manifest):
            return
        if manifest["total"] != len(rows):
            self.add(MANIFEST, "total", f"{manifest['total']}, but {TASKS_FILE} holds "
                     f"{len(rows)} tasks")
        if "counts" in manifest:
            found = Counter((str(row.get("type")), str(row.get("difficulty")))
                            for _, row in rows)
            for task_type, cells in manifest["counts"].items():
                for difficulty, count in cells.items():
                    if found[task_type, difficulty] != count:
                        self.add(MANIFEST, f"counts.{task_type}.{difficulty}",
                                 f"{count}, but {TASKS_FILE} holds "
                                 f"{found[task_type, difficulty]}")

    # solver_report.json
    def report(self, data: bytes, tasks: int) -> None:
        try:
            report = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            self.add(SOLVER_REPORT, "", f"not JSON ({_short(str(exc))[1:-1]})")
            return
        if self.against_schema(SOLVER_REPORT, report) and report["config"]["tasks"] != tasks:
            self.add(SOLVER_REPORT, "config.tasks", f"{report['config']['tasks']}, but "
                     f"{TASKS_FILE} holds {tasks} tasks")


def content_problems(manifest: Mapping[str, Any], tasks: Sequence[Row],
                     workflows: Sequence[Row] | None, report: bytes | None,
                     report_problem: Problem | None = None, *,
                     realistic: Sequence[Row] | None = None) -> list[Problem]:
    """Every problem of a set's content, in file order: manifest, tasks, workflows, realistic
    plans, report."""
    from pytest_resilibench.core.registry import default_registry

    checker = _Checker(default_registry())
    checker.manifest(manifest, tasks)
    sound = checker.tasks(tasks)
    if workflows is not None:
        checker.workflows(workflows, sound)
    if realistic is not None:
        checker.realistic(realistic, sound)
    if report_problem is not None:
        checker.problems.append(report_problem)
    elif report is not None:
        checker.report(report, len(tasks))
    return checker.problems
