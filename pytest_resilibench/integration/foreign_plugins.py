"""Another package's pytest plugin that one of our extras installs, kept out of the runs that do
not ask for it.

pytest loads every `pytest11` entry point of the venv in every run, for every project. The
`[langgraph]` extra brings langsmith's (`langsmith_plugin`; langchain-core needs langsmith),
whose import costs ~0.7 s a run (bench/bench_startup.py). As this plugin registers
(`pytest_addhooks`, called as pytest loads the entry points one distribution after another)
it blocks it, and pytest then skips its entry point.

A run asks for it with `-p langsmith_plugin` (on the command line, in `addopts` or
PYTEST_ADDOPTS): pytest loads that before any entry point, and it stays. A run that collects a
test using it (its marker, `@pytest.mark.langsmith`, or a fixture named after it) stops with
a usage error saying to add `-p langsmith_plugin`.

anyio's plugin is left alone although the base install brings it (openai, httpx, starlette
need anyio; ~0.1 s): projects that test async code use it, and blocking it would change their
runs on install, which a plugin that does nothing until asked must not do.

Limit: the venv's metadata lists the distributions in file-system order. Where langsmith's
comes before ours, its import is paid before we can block it; blocking then unregisters it,
so a run behaves the same whichever order (no hooks, no fixtures) and saves only the hooks'
cost. `-p no:langsmith_plugin` in a project's own addopts always keeps the import out.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

__all__ = ["BLOCKED", "block_unasked", "check_items", "register_markers"]

# Entry-point name -> the word its marker and fixtures start with.
BLOCKED: dict[str, str] = {"langsmith_plugin": "langsmith"}
_OFF = pytest.StashKey[tuple[str, ...]]()


def block_unasked(pluginmanager: pytest.PytestPluginManager) -> None:
    """Block the plugins of `BLOCKED` that the run's `-p` options do not name."""
    config = pluginmanager.get_plugin("pytestconfig")  # registered as the Config is made
    if not isinstance(config, pytest.Config):
        return
    # The `-p` values, parsed (addopts included) before pytest loads any plugin by them.
    known = getattr(config, "known_args_namespace", None)
    asked = {str(p).strip() for p in getattr(known, "plugins", None) or ()}
    off = tuple(name for name in BLOCKED
                if name not in asked and not pluginmanager.is_blocked(name))
    for name in off:
        pluginmanager.set_blocked(name)  # unregisters it, where it loaded before us
    config.stash[_OFF] = off


def register_markers(config: pytest.Config) -> None:
    """The blocked plugins' markers, so that `--strict-markers` lets `check_items` explain."""
    for name in config.stash.get(_OFF, ()):
        config.addinivalue_line("markers", f"{BLOCKED[name]}: off in this run (-p {name})")


def check_items(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """A usage error naming `-p NAME` where a collected test uses a blocked plugin."""
    for name in config.stash.get(_OFF, ()):
        word = BLOCKED[name]
        users = [item.nodeid for item in items if _uses(item, word)]
        if users:
            raise pytest.UsageError(
                f"{users[0]} uses the {word} pytest plugin, which pytest-resilibench keeps out "
                f"of runs that do not ask for it: run with -p {name} (or add it to addopts)")


def _uses(item: pytest.Item, word: str) -> bool:
    fixtures: Sequence[str] = getattr(item, "fixturenames", ())
    return (item.get_closest_marker(word) is not None
            or any(f == word or f.startswith(word + "_") for f in fixtures))
