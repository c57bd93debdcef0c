"""integration/preload.py: the package is off pytest's assertion-rewriting list, and one call
imports every module a thread of the run may import (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from pytest_resilibench.integration.preload import PACKAGE, keep_out_of_assertion_rewriting


def test_the_package_is_off_the_rewriting_list_of_this_very_run(
        pytestconfig: pytest.Config) -> None:
    hook = pytestconfig.pluginmanager.rewrite_hook
    marked = hook._must_rewrite  # type: ignore[attr-defined]
    assert isinstance(marked, set) and PACKAGE not in marked
    assert "xdist" in marked  # other plugins' packages keep pytest's rule


def test_taking_the_package_off_forgets_what_the_hook_had_decided() -> None:
    hook = SimpleNamespace(_must_rewrite={PACKAGE, "other"},
                           _marked_for_rewrite_cache={f"{PACKAGE}.core": True, "other.x": True})
    keep_out_of_assertion_rewriting(SimpleNamespace(rewrite_hook=hook))
    assert hook._must_rewrite == {"other"}
    assert hook._marked_for_rewrite_cache == {"other.x": True}
    keep_out_of_assertion_rewriting(object())  # a pytest without the list: nothing to do


PROBE = """
import json, pkgutil, sys
import pytest_resilibench.integration.preload as preload
preload.import_before_threads()
expected = []
for sub in ("base", "core", "runtime", "integration", "reporting"):
    package = sys.modules["pytest_resilibench." + sub]
    expected += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
print(json.dumps({"missing": [m for m in expected if m not in sys.modules],
                  "servers": sorted(m for m in sys.modules if ".servers" in m),
                  "openai": "openai" in sys.modules, "jsonschema": "jsonschema" in sys.modules}))
"""


def test_one_call_imports_what_episodes_agents_and_the_summary_use() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout
    found = json.loads(out)
    # The model providers come with the agents that use them (the runner makes those first).
    # The OpenTelemetry exporter comes with `--resili-otel` (its extra may be missing).
    assert sorted(found["missing"]) == ["pytest_resilibench.integration.otel",
                                        "pytest_resilibench.integration.otlp_http",
                                        "pytest_resilibench.runtime.agents.openai_provider",
                                        "pytest_resilibench.runtime.agents.responses",
                                        "pytest_resilibench.runtime.agents.transport"]
    assert found["servers"] == [] and not found["openai"] and found["jsonschema"]


# Every optional extra's top-level package, made unimportable as in an install without it.
_EXTRAS = ("opentelemetry", "mcp", "torch", "matplotlib", "agents", "langgraph",
           "langchain_core", "langchain_openai", "sklearn", "playwright")
NO_EXTRAS = f"""
import sys
for name in {_EXTRAS!r}:
    sys.modules[name] = None  # import raises ModuleNotFoundError, as without the extra
from pytest_resilibench.integration.preload import import_before_threads
import_before_threads()
print("ok")
"""


def test_the_preload_needs_no_optional_extra() -> None:
    """A wheel installed without extras crashed every run when a preloaded module imported
    one at module level (the OpenTelemetry exporter did: bench/bench_no_crash.py)."""
    done = subprocess.run([sys.executable, "-c", NO_EXTRAS], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
