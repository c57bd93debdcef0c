"""Every import of this package that the README, docs/*.md and docs/examples/*.py show uses
public names only (docs/API.md) and runs."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_public_api import PUBLIC_MODULES

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs" / "examples").glob("*.py"))]
_FENCED = re.compile(r"```python\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`((?:from|import) pytest_resilibench[^`]*)`")


def python_of(path: Path) -> list[str]:
    """The Python a document shows: a module's source, or a markdown file's python blocks
    and its inline import statements."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [text]
    return _FENCED.findall(text) + _INLINE.findall(text)


def package_imports(path: Path) -> list[tuple[str, list[str], str]]:
    """(module, names, the statement) of each import of this package in a document."""
    found = []
    for source in python_of(path):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "pytest_resilibench"):
                found.append((node.module or "", [a.name for a in node.names],
                              ast.unparse(node)))
            elif isinstance(node, ast.Import):
                found += [(a.name, [], ast.unparse(node)) for a in node.names
                          if a.name.startswith("pytest_resilibench")]
    return found


IMPORTS = [(path.relative_to(ROOT).as_posix(), *found) for path in DOCS
           for found in package_imports(path)]


def test_the_docs_show_imports_of_the_public_api() -> None:
    """The README and both shapes' examples import from the package (the test is not empty)."""
    shown = {doc for doc, *_ in IMPORTS}
    assert {"README.md", "docs/API.md", "docs/examples/turn_agent.py",
            "docs/examples/planner_agent.py", "docs/examples/agents_sdk_agent.py",
            "docs/examples/langgraph_agent.py"} <= shown


@pytest.mark.parametrize(("doc", "module", "names", "statement"), IMPORTS,
                         ids=[f"{doc}:{statement}" for doc, _, _, statement in IMPORTS])
def test_each_import_uses_public_names_and_runs(doc: str, module: str, names: list[str],
                                                statement: str) -> None:
    assert module in PUBLIC_MODULES, f"{doc} imports the internal module {module}"
    public = importlib.import_module(module).__all__
    assert set(names) <= set(public), f"{doc}: {sorted(set(names) - set(public))} not public"
    run = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-1500:]
