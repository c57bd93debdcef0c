"""The import rule of docs/ARCHITECTURE.md: a module imports its own layer and the layers
below it, never one above. Read from the source (ast), so it holds for lazy imports too.

A module's layer is the longest entry of `LAYERS` that names it or a package above it. There is
no list of allowed exceptions: an import that breaks the rule fails the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pytest_resilibench"

# Lowest first. `solver` is a side branch: it may import base and core, and only the
# application (cli) imports it.
ORDER = ("base", "core", "runtime", "servers", "reporting", "integration", "app")
SIDE = {"solver": ("base", "core")}

# --- layers ---
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
# --- end of layers ---


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "solver":
        parts = [PACKAGE, *parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_of(p): p for folder in (PACKAGE, "solver")
            for p in (ROOT / folder).rglob("*.py")}


def _imports(module: str, path: Path) -> set[str]:
    """Every package module a source names in an import (relative ones resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith(PACKAGE)}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        layer = LAYERS.get(".".join(parts[:n]))
        if layer is not None:
            return layer
    return None


def _may_import(importer: str, imported: str) -> bool:
    low, high = _layer(imported), _layer(importer)
    assert low is not None and high is not None
    if imported == PACKAGE or low == high == "app":
        return True
    if high in SIDE or low in SIDE:
        return low == high or low in SIDE.get(high, ()) or high == "app"
    if ORDER.index(low) > ORDER.index(high):
        return False
    if high != "runtime" or importer == AGENTS or importer.startswith(AGENTS + "."):
        return True
    return imported == PROTOCOL or not (imported == AGENTS or imported.startswith(AGENTS + "."))


def _edges() -> set[tuple[str, str]]:
    sources = _sources()
    return {(module, target) for module, path in sources.items()
            for target in _imports(module, path) if target in sources and target != module}


def test_every_module_has_a_layer() -> None:
    assert [m for m in _sources() if _layer(m) is None] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    assert sorted(edge for edge in _edges() if not _may_import(*edge)) == []


def test_the_rule_refuses_what_it_should() -> None:
    """The rule itself: a core module importing the runtime, the runtime importing an agent,
    a base module importing core are refused; the reverse directions are allowed."""
    refused = [("pytest_resilibench.core.registry", "pytest_resilibench.runtime.episode"),
               ("pytest_resilibench.runtime.episode", "pytest_resilibench.runtime.agents.builtin"),
               ("pytest_resilibench.base.names", "pytest_resilibench.core.registry"),
               ("pytest_resilibench.core.simulator", "pytest_resilibench.solver.solve")]
    assert not [edge for edge in refused if _may_import(*edge)]
    assert all(_may_import(high, low) for low, high in refused[:3])
    assert _may_import("pytest_resilibench.solver.solve", "pytest_resilibench.core.optimum.dp")


def test_the_protocol_imports_nothing_of_the_runtime() -> None:
    """runtime/protocol.py is the contract agent authors read: types only. The modules that
    run agents depend on it, never the reverse (no circle through episode, loop_episode and
    the agent boundary)."""
    runtime = [target for module, target in _edges()
               if module == PROTOCOL and target.startswith("pytest_resilibench.runtime")]
    assert runtime == []
