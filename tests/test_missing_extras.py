"""The tests of an optional extra skip cleanly where the extra is not installed.

Run in a process that hides the extras' installed packages (as if never installed), the
adapters' test modules skip and none errors at collection. A test folder named like an extra's
import name (`tests/unit/agents`, now `tests/unit/runtime_agents`) made `agents` a namespace
package of the checkout: `pytest.importorskip("agents")` passed, and the import after it failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The import names of the adapters' extras ([agents-sdk], [langgraph]; pyproject.toml).
EXTRAS = ("agents", "langgraph", "langchain_openai", "langchain_core")

# A `-p` plugin, loaded before any test module: a top-level import of a hidden name finds
# only what lies outside the installed packages (a folder of the checkout), as it would in a
# venv without the extra.
HIDER = f'''
import importlib.abc
import importlib.machinery
import sys

HIDDEN = {EXTRAS!r}


class HideInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in HIDDEN:
            return None
        outside = [p for p in sys.path if "-packages" not in p]
        spec = importlib.machinery.PathFinder.find_spec(name, outside)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return spec


sys.meta_path.insert(0, HideInstalled())
'''


def test_the_adapters_tests_skip_without_their_extras(tmp_path: Path) -> None:
    (tmp_path / "hide_extras.py").write_text(HIDER)
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/unit/adapters", "-p", "hide_extras",
         "-p", "no:cacheprovider", "-q", "-rs"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True)
    out = run.stdout[-3000:]
    # Every module skipped: no test ran (exit code 5), and none errored.
    assert run.returncode == 5, out
    assert "2 skipped" in out and "error" not in out.lower(), out
    assert "the [agents-sdk] extra" in out and "the [langgraph] extra" in out, out
