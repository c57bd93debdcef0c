#!/usr/bin/env python3
"""Move pytest-resilibench's flat modules into one folder per layer (issue 17).

Run in the root of a clean checkout:   python tools/move_layers.py [--check]

What it does, in order (nothing is committed; review with `git status`, then commit):
1. refuses unless the tree is clean and the layout is still flat (so it never runs twice);
2. `git mv`s every module of MOVES into its layer's folder (base/, core/, runtime/,
   servers/, reporting/, integration/), each new folder a package with a docstring;
   plugin.py (the pytest11 entry point), hookspec.py, cli.py (the console script) and the
   package's __init__.py stay where users and pyproject expect them;
3. rewrites every name of a moved module in every tracked text file (package, solver/,
   tests/, bench/, suites/, docs/, README, pyproject): dotted names (`from X import`,
   `import X`, `"pytest_resilibench.x"` strings, `py:` specs, mock targets), slash paths
   (`pytest_resilibench/x.py`), `from pytest_resilibench import x` and solver/'s relative
   imports of a module that left solver/;
4. fixes what names a module other than by its dotted name (pyproject's package list and
   package data, the package's lazy exports, the wheel test);
5. installs the folder form of the layer table in tests/test_layers.py and drops the "flat
   today" note of docs/ARCHITECTURE.md;
6. sorts the imports it changed with ruff (`ruff check --select I --fix`) when ruff is found,
   and lists any line the longer names pushed past 100 characters.
`--check` lists the moves and exits without touching anything.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

PKG = "pytest_resilibench"

LAYER_DOCS = {
    "base": "Shared vocabulary and small helpers with no dependency on the rest of the package.",
    "core": "The benchmark's model: tools, simulator, tasks, flaws, prompts, scoring, records.",
    "runtime": "Running episodes: the model protocol, parsing, environments, the turn loop, "
               "agents.",
    "servers": "Servers on loopback and their clients: the OpenAI test server, MCP, live APIs.",
    "reporting": "Summaries, statistics, the JSON and HTML reports and the outcome words.",
    "integration": "The pytest integration: options, cases, the runner, the session, gates.",
}

# old dotted name (below the package) -> new dotted name. A package moves with its modules.
MOVES: dict[str, str] = {
    **{m: f"base.{m}" for m in ("names", "rng", "atomic", "jsonfile", "redact", "outputs",
                                 "extras")},
    **{m: f"core.{m}" for m in ("registry", "catalog", "simulator", "faults", "workflow",
                                 "tasks", "fixture_files", "flaws", "plan_text", "plan_audit",
                                 "prompts", "scoring", "record")},
    "solver.matcher": "core.matcher",  # the agents use it: not part of the offline solver
    "agents.base": "runtime.protocol",  # what agents depend on, never the reverse
    "agents": "runtime.agents",
    **{m: f"runtime.{m}" for m in ("parsing", "environment", "episode", "loop_episode")},
    **{m: f"servers.{m}" for m in ("loopback", "testserver", "testserver_rules", "mcp_server",
                                    "mcp_environment")},
    "live": "servers.live",
    **{m: f"reporting.{m}" for m in ("vocabulary", "stats", "sequential", "analysis",
                                      "report", "schemas", "report_data", "report_html")},
    **{m: f"integration.{m}" for m in ("options", "cases", "runner", "ahead", "scheduling",
                                        "session", "store", "gate", "suite", "prompt_cache",
                                        "resume")},
}
# Files that are not modules but move with one.
ASSETS = {"report_viewer.js": "reporting/report_viewer.js"}

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".ini", ".txt", ".js", ".json"}
SKIP_DIRS = ("fixtures/",)  # generated data, verified by sha256: never rewritten

LAYERS_BLOCK = '''\
LAYERS = {
    "pytest_resilibench": "app",  # the package's lazy exports and cli.py
    "pytest_resilibench.base": "base",
    "pytest_resilibench.core": "core",
    "pytest_resilibench.runtime": "runtime",
    "pytest_resilibench.servers": "servers",
    "pytest_resilibench.reporting": "reporting",
    "pytest_resilibench.integration": "integration",
    "pytest_resilibench.plugin": "integration",  # the pytest11 entry point stays at the top
    "pytest_resilibench.hookspec": "integration",
    "pytest_resilibench.solver": "solver",
}
# Inside runtime, the agents depend on the protocol and the episode, never the reverse: no
# runtime module outside runtime/agents/ imports an agent.
AGENTS, PROTOCOL = "pytest_resilibench.runtime.agents", "pytest_resilibench.runtime.protocol"
'''
LAYERS_START = "# --- layers: move_layers.py replaces this block with the folder form ---\n"
LAYERS_END = "# --- end of layers ---\n"
FLAT_NOTE = re.compile(r"<!-- flat-layout note -->.*?<!-- /flat-layout note -->\n", re.S)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def _path_of(dotted: str) -> Path:
    """Where a module or package of the installed name lives in the checkout."""
    parts = dotted.split(".")
    base = Path("solver", *parts[1:]) if parts[0] == "solver" else Path(PKG, *parts)
    return base if base.is_dir() else base.with_suffix(".py")


def _new_path(dotted: str) -> Path:
    return Path(PKG, *MOVES[dotted].split("."))


def refuse_unless_flat_and_clean() -> None:
    if not Path(PKG, "plugin.py").is_file():
        sys.exit("move_layers: run me in the root of a pytest-resilibench checkout")
    done = [layer for layer in LAYER_DOCS if Path(PKG, layer).exists()]
    if done:
        sys.exit(f"move_layers: already applied ({PKG}/{done[0]}/ exists); nothing done")
    missing = [old for old in MOVES if not _path_of(old).exists()]
    if missing:
        sys.exit(f"move_layers: these modules are not where the flat layout has them: {missing}")
    if _git("status", "--porcelain").strip():
        sys.exit("move_layers: the working tree has changes; commit or stash them first")


def move_files() -> None:
    for layer, doc in LAYER_DOCS.items():
        folder = Path(PKG, layer)
        folder.mkdir()
        (folder / "__init__.py").write_text(f'"""{doc}"""\n', encoding="utf-8")
        _git("add", str(folder / "__init__.py"))
    # The one module that moves out of a package that moves too (agents.base) goes first.
    for old in sorted(MOVES, key=lambda name: -name.count(".")):
        src, dst = _path_of(old), _new_path(old)
        if src.is_file():
            dst = dst.with_suffix(".py")
        dst.parent.mkdir(parents=True, exist_ok=True)
        _git("mv", str(src), str(dst))
    for src_name, dst_name in ASSETS.items():
        _git("mv", str(Path(PKG, src_name)), str(Path(PKG, dst_name)))


def _new_dotted(dotted: str) -> str | None:
    """The new name of `pytest_resilibench.<dotted...>`, or None when it did not move: the
    longest moved prefix decides (`agents.base.X` -> `runtime.protocol.X`)."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        new = MOVES.get(".".join(parts[:n]))
        if new is not None:
            return ".".join([new, *parts[n:]])
    return None


_DOTTED = re.compile(rf"\b{PKG}((?:\.[A-Za-z_]\w*)+)")
_SLASHED = re.compile(rf"(?<![\w/]){PKG}/((?:\w+/)*\w+)\.py\b|(?<![\w/])solver/(\w+)\.py\b")


def _rewrite_names(text: str) -> str:
    def dotted(match: re.Match[str]) -> str:
        new = _new_dotted(match.group(1)[1:])
        return match.group(0) if new is None else f"{PKG}.{new}"

    def slashed(match: re.Match[str]) -> str:
        rel = match.group(1) if match.group(1) is not None else f"solver/{match.group(2)}"
        new = _new_dotted(rel.replace("/", "."))
        return match.group(0) if new is None else f"{PKG}/{new.replace('.', '/')}.py"

    return _SLASHED.sub(slashed, _DOTTED.sub(dotted, text))


def _targets(node: ast.ImportFrom, in_solver: bool) -> list[tuple[str, str]] | None:
    """(parent, name as written) per imported name, or None when nothing moved."""
    names = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names]
    if in_solver and node.level == 1 and node.module:  # from .matcher import X
        new = _new_dotted(f"solver.{node.module}")
        return None if new is None else [(f"{PKG}.{new}", n) for n in names]
    if not ((node.level == 0 and node.module == PKG) or (in_solver and node.level == 1)):
        return None
    here = PKG if node.level == 0 else "."
    found, moved = [], False
    for alias, written in zip(node.names, names, strict=True):
        new = _new_dotted(alias.name if node.level == 0 else f"solver.{alias.name}")
        if new is None:
            found.append((here, written))
        else:
            moved = True
            parent, _, leaf = new.rpartition(".")
            found.append((f"{PKG}.{parent}".rstrip("."), written.replace(alias.name, leaf, 1)))
    return found if moved else None


def _rewrite_from_package(text: str, path: Path) -> str:
    """`from pytest_resilibench import faults as f` names a module as an attribute of the
    package: such imports are split by the names' new parents; solver/'s relative imports of
    a module that left solver/ become absolute."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    in_solver = path.parts[0] == "solver"
    lines = text.splitlines(keepends=True)
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.end_lineno is None:
            continue
        targets = _targets(node, in_solver)
        if targets is None:
            continue
        groups: dict[str, list[str]] = {}
        for parent, name in targets:
            groups.setdefault(parent, []).append(name)
        indent = " " * node.col_offset
        edits.append((node.lineno - 1, node.end_lineno,
                      "".join(f"{indent}from {parent} import {', '.join(names)}\n"
                              for parent, names in groups.items())))
    for start, end, new_text in sorted(edits, reverse=True):
        lines[start:end] = [new_text]
    return "".join(lines)


_LONG_BEFORE: dict[Path, set[str]] = {}  # each rewritten file's lines over 100 characters


def _lengthened() -> list[str]:
    """Lines over 100 characters that the rewrite made (after ruff wrapped the imports)."""
    return [f"{path}:{n}" for path, before in _LONG_BEFORE.items()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 100 and line not in before]


def rewrite_text_files() -> list[Path]:
    changed = []
    for name in _git("ls-files").splitlines():
        path = Path(name)
        if path.suffix not in TEXT_SUFFIXES or name.startswith(SKIP_DIRS) or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        new = _rewrite_names(text)
        if path.suffix == ".py":
            new = _rewrite_from_package(new, path)
        if new != text:
            path.write_text(new, encoding="utf-8")
            if path.suffix == ".py":  # ruff's line limit (prose has none)
                _LONG_BEFORE[path] = {line for line in text.splitlines() if len(line) > 100}
            changed.append(path)
    return changed


def _edit(path: str, old: str, new: str) -> None:
    file = Path(path)
    text = file.read_text(encoding="utf-8")
    if old not in text:
        sys.exit(f"move_layers: {path} no longer holds {old!r}; fix it by hand")
    file.write_text(text.replace(old, new), encoding="utf-8")


def fix_special_cases() -> None:
    packages = sorted({f"{PKG}.{new.rsplit('.', 1)[0]}" for new in MOVES.values()}
                      | {f"{PKG}.runtime.agents", f"{PKG}.servers.live"})
    text = Path("pyproject.toml").read_text(encoding="utf-8")
    listed = re.search(r"packages = \[\n(.*?)\]", text, re.S)
    if listed is None:
        sys.exit("move_layers: pyproject.toml's packages list is not where it was")
    current = re.findall(r'"([\w.]+)"', listed.group(1))
    wanted = sorted(set(current) | set(packages))
    _edit("pyproject.toml", listed.group(0),
          "packages = [\n" + "".join(f'    "{p}",\n' for p in wanted) + "]")
    _edit("pyproject.toml", '"py.typed", "report_viewer.js"]',
          '"py.typed"]\n"pytest_resilibench.reporting" = ["report_viewer.js"]')
    _edit(f"{PKG}/__init__.py", 'f"pytest_resilibench.{module}"',
          'f"pytest_resilibench.core.{module}"')
    _edit("tests/test_wheel.py", '"suite.py"', '"integration/suite.py"')
    layers = Path("tests/test_layers.py").read_text(encoding="utf-8")
    start, end = layers.index(LAYERS_START) + len(LAYERS_START), layers.index(LAYERS_END)
    Path("tests/test_layers.py").write_text(layers[:start] + LAYERS_BLOCK + layers[end:],
                                            encoding="utf-8")
    arch = Path("docs/ARCHITECTURE.md")
    arch.write_text(FLAT_NOTE.sub("", arch.read_text(encoding="utf-8")), encoding="utf-8")


def sort_imports(files: list[Path]) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    py = [str(f) for f in files if f.suffix == ".py" and f.exists()]
    if ruff is None:
        print("ruff not found: run `ruff check --select I --fix .` to sort the imports")
    elif py:
        subprocess.run([ruff, "check", "--no-cache", "--select", "I", "--fix", "--quiet", *py],
                       check=False)


def main() -> None:
    if "--check" in sys.argv[1:]:
        for old, new in sorted(MOVES.items()):
            print(f"{_path_of(old)} -> {PKG}/{new.replace('.', '/')}")
        return
    refuse_unless_flat_and_clean()
    move_files()
    changed = rewrite_text_files()
    fix_special_cases()
    sort_imports(changed)
    long = _lengthened()
    if long:
        print("lines the longer names pushed past 100 characters (wrap them):", *long,
              sep="\n  ")
    print(f"moved {len(MOVES)} modules and packages into {len(LAYER_DOCS)} layer folders; "
          f"rewrote {len(changed)} files. Next: ruff check ., mypy, make test; then commit.")


if __name__ == "__main__":
    main()
