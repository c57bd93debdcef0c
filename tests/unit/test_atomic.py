"""The one atomic writer: all or nothing, readable by others."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pytest_resilibench.base.atomic import atomic_open, atomic_write


def test_a_written_file_replaces_the_old_one_and_is_0644(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("old")
    atomic_write(path, b"new")
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert list(tmp_path.iterdir()) == [path]


def test_an_interrupted_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("half of it")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert list(tmp_path.iterdir()) == [path]
