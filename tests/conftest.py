"""Shared test configuration.

pytester's in-process runs (`pytester.runpytest`) snapshot `sys.modules` and drop whatever a
run imported. A module first imported inside such a run is imported again later as a second
copy, with its own classes: `except httpcore2.ReadError` (built lazily by httpx2) or
`except InfrastructureError` then misses the other copy's exceptions, and tests fail depending
on their order. Importing these modules here, before any snapshot, keeps one copy of each.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

for _name in (
    "anyio", "httpcore", "httpx", "httpcore2", "httpx2", "openai", "uvicorn", "starlette",
    "pytest_resilibench.runtime.agents.builtin",
    "pytest_resilibench.runtime.agents.cache",
    "pytest_resilibench.runtime.agents.openai_provider",
    "pytest_resilibench.reporting.summarize",
    "pytest_resilibench.reporting.comparison",
    "pytest_resilibench.reporting.tables",
    "pytest_resilibench.runtime.episode",
    "pytest_resilibench.servers.live.environment",
    "pytest_resilibench.servers.live.server",
    "pytest_resilibench.core.prompts",
    "pytest_resilibench.reporting.report",
    "pytest_resilibench.integration.session",
    "pytest_resilibench.servers.testserver",
):
    importlib.import_module(_name)


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout built as a wheel, once per test process. Built from a copy: setuptools
    builds in the source tree (build/, *.egg-info), and two xdist workers may build at once
    (pytest 9.2 broke xdist 3.8's `--dist loadgroup`, so groups do not keep them apart)."""
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "out"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True)
    (built,) = out.glob("pytest_resilibench-*.whl")
    return built


@pytest.fixture(scope="session")
def wheel_site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel unpacked as a site folder, as pip installs it (its dist-info included, so
    pytest finds the plugin's entry point): put it first on PYTHONPATH, and a run imports
    the installed package, not this checkout."""
    site = tmp_path_factory.mktemp("site")
    zipfile.ZipFile(wheel).extractall(site)
    return site


@pytest.fixture(scope="session", autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The verdicts a run keeps (base/checked.py: task sets found sound) go to a folder of
    the test session's, not the user's cache: no test depends on what an earlier one left."""
    folder = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        yield folder


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KB tmpfs, a full disk on demand (tests/full_disk.py)."""
    from tests.full_disk import mounted_tmpfs

    with mounted_tmpfs(tmp_path / "fs") as mount:
        yield mount
