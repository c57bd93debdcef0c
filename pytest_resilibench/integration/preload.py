"""Nothing parsed in two threads at once: the package's imports happen on pytest's thread.

Why: CPython 3.11 and 3.12 keep the `ast` constructor's recursion depth per interpreter, not
per thread (python/cpython#106905). Two threads inside `ast.parse` at once can end in
`SystemError: AST constructor recursion depth mismatch`, and pytest's assertion rewriter
`ast.parse`s every module of a plugin's distribution when it is imported (it marks the
distribution's top-level packages for rewriting, `_pytest/config/__init__.py`
`_mark_plugins_for_rewrite`). So a run whose episode thread imported a module of this package
while pytest's thread imported another died with INTERNALERROR in most real-model and `py:`
agent launches (docs/ARCHITECTURE.md, Plugin, "Threads"). Two fixes, each enough for this
package's own modules:

1. `keep_out_of_assertion_rewriting`: the package holds no test asserts, so pytest never needs
   to parse it; it comes off the rewriter's list as the plugin registers (`PYTEST_DONT_REWRITE`
   in a docstring would not do: pytest parses the module before it reads the docstring).
2. `import_before_threads`: every module the episode thread, the servers' threads and the
   summary may import lazily is imported here, on pytest's thread, before the first thread
   starts; the runner also makes its agents (a user's factory, a provider) on this thread
   (`runner.py`). A thread then imports nothing of ours while pytest's thread may.

`tests/plugin/test_no_crash.py` launches the installed wheel under an audit of the parses and
imports made off the main thread; `bench/bench_no_crash.py` counts crashes over many launches.
"""

from __future__ import annotations

import functools
import importlib
import sys

__all__ = ["import_before_threads", "keep_out_of_assertion_rewriting"]

PACKAGE = "pytest_resilibench"
# Imported whole: what episodes, agents and the summary use. `servers` and `solver` are not
# (optional extras: mcp, torch); a run that uses a server imports it on this thread when it
# starts the server, and `import_before_threads` then completes that subpackage.
# `adapters` imports its frameworks only when an adapter is built (on this thread: the
# runner makes its agents here), so importing it whole costs nothing.
_SUBPACKAGES = ("adapters", "base", "core", "runtime", "integration", "reporting")
# Third-party modules that those import lazily (core/registry.py, agents/prompt_reader.py):
# importing jsonschema runs `inspect.signature`, which `ast.parse`s.
_LAZY_DEPENDENCIES = ("jsonschema", "rank_bm25")
# Packages whose public names load on first use (PEP 562) and that pytest parses, being
# plugins themselves: anyio, which httpx, openai, starlette and mcp call from our threads
# (the MCP client's `anyio.open_process` loaded `anyio._core._subprocesses` there).
_LAZY_NAMES = ("anyio",)
# Imported by the agents that use them, which the runner makes on this thread: openai alone
# costs ~0.5 s, which a run of `py:` or built-in agents need not pay. The transport is the
# adapters' (made on this thread too, when an adapter is built).
_PROVIDERS = ("runtime.agents.openai_provider", "runtime.agents.responses",
              "runtime.agents.transport",
              # The OpenTelemetry exporter needs the `otel` extra: `--resili-otel` imports
              # it on this thread at start-up, and a run without the option never does.
              "integration.otel", "integration.otlp_http")


def keep_out_of_assertion_rewriting(pluginmanager: object) -> None:
    """Take this package off pytest's assertion-rewriting list (see the module docstring).

    The list is the rewrite hook's private `_must_rewrite` set (pytest 8 and 9); where a pytest
    lacks it, nothing changes and `import_before_threads` still keeps the threads apart."""
    hook = getattr(pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if not isinstance(marked, set) or PACKAGE not in marked:
        return
    marked.discard(PACKAGE)
    decided = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(decided, dict):
        for name in [name for name in decided if _ours(name)]:
            del decided[name]


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def import_before_threads() -> None:
    """Import, on the calling thread (pytest's), every module a thread of this run may
    import: the subpackages above whole, and the rest of any subpackage the run already
    uses (a live or MCP server's). Call it before starting a thread; cheap when repeated."""
    _import_subpackages(_SUBPACKAGES)
    for name in _LAZY_DEPENDENCIES:
        importlib.import_module(name)
    for name in _LAZY_NAMES:
        module = importlib.import_module(name)
        for attribute in dir(module):  # its `__dir__` lists the lazy names
            getattr(module, attribute)  # loads the module behind one now
    used = sorted({name.split(".")[2] for name in list(sys.modules)
                   if name.startswith(f"{PACKAGE}.servers.") and name.count(".") >= 2})
    for sub in used:  # `servers.live`, `servers.loopback`, ...: each one in use, whole
        _import_package(f"{PACKAGE}.servers.{sub}")


@functools.cache
def _import_subpackages(names: tuple[str, ...]) -> None:
    for name in names:
        _import_package(f"{PACKAGE}.{name}")


def _import_package(name: str) -> None:
    import pkgutil  # here: every pytest run of every project imports this module

    module = importlib.import_module(name)
    path = getattr(module, "__path__", None)
    if path is None:
        return
    skip = tuple(f"{PACKAGE}.{provider}" for provider in _PROVIDERS)
    for info in pkgutil.walk_packages(path, f"{name}."):
        if info.name not in sys.modules and not info.name.startswith(skip):
            importlib.import_module(info.name)
