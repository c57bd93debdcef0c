"""The public API (docs/API.md): each documented name imports from its public path, each
module's `__all__` is what the docs list, and the top level exports nothing else."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_resilibench

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "API.md"
# The extra each adapter module needs: without it, the module's own import stays cheap (the
# framework is imported when an adapter is built), so it is checked all the same.
PUBLIC_MODULES = ("pytest_resilibench", "pytest_resilibench.adapters.agents_sdk",
                  "pytest_resilibench.adapters.langgraph")


def documented() -> dict[str, list[str]]:
    """Module -> the names its table in docs/API.md lists, in order."""
    tables: dict[str, list[str]] = {}
    module = None
    for line in API.read_text(encoding="utf-8").splitlines():
        heading = re.fullmatch(r"## `([\w.]+)`", line)
        if heading:
            module = heading[1]
            tables[module] = []
        elif line.startswith("## "):
            module = None
        elif module is not None and (row := re.match(r"\| `(\w+)` \|", line)):
            tables[module].append(row[1])
    return tables


def test_the_docs_list_every_public_module() -> None:
    assert tuple(documented()) == PUBLIC_MODULES


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_all_is_what_the_docs_list(module: str) -> None:
    names = documented()[module]
    assert len(names) == len(set(names))
    assert sorted(importlib.import_module(module).__all__) == sorted(names)


def test_every_public_name_imports_from_its_public_path_in_a_fresh_process() -> None:
    """`from MODULE import NAME` for every documented name, in a process of its own (nothing
    imported before it), and what it gets is the object the internal module holds."""
    lines = [f"from {module} import {name}" for module, names in documented().items()
             for name in names]
    script = "\n".join([*lines, "import json",
                        "print(json.dumps(sorted(k for k in dir() if not k.startswith('_') "
                        "or k == '__version__')))"])
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    imported = set(json.loads(run.stdout))
    assert {name for names in documented().values() for name in names} <= imported


def test_the_public_names_are_the_internal_objects() -> None:
    """Each public name is the object its module holds (read through `sys.modules`, as the
    lazy loader reads it: an in-process pytester run may leave a stale submodule attribute)."""
    for name, (module, attribute) in pytest_resilibench._PUBLIC.items():
        internal = importlib.import_module(f"pytest_resilibench.{module}")
        assert getattr(pytest_resilibench, name) is getattr(internal, attribute), name
    assert pytest_resilibench._PUBLIC["Episode"] == ("runtime.protocol", "Episode")
    assert pytest_resilibench._PUBLIC["Plan"] == ("core.workflow", "Workflow")


@pytest.mark.parametrize("internal", ["Simulator", "ToolRegistry", "success_probability",
                                      "default_registry", "EpisodeKey"])
def test_the_top_level_no_longer_exports_simulator_internals(internal: str) -> None:
    assert internal not in dir(pytest_resilibench)
    with pytest.raises(AttributeError, match=internal):
        getattr(pytest_resilibench, internal)
    # ... which stay where they live
    assert any(hasattr(importlib.import_module(f"pytest_resilibench.core.{m}"), internal)
               for m in ("simulator", "registry"))


def test_importing_the_package_imports_nothing_heavy() -> None:
    """pytest imports the package in every run of every project in the venv (the plugin):
    the public names load on first use."""
    script = ("import sys, pytest_resilibench\n"
              "print(sorted(m for m in ('numpy', 'openai', 'agents', 'langgraph', "
              "'pytest_resilibench.runtime.protocol') if m in sys.modules))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True)
    assert run.stdout.strip() == "[]"
