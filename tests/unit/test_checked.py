"""Verdicts remembered on disk (base/checked.py): kept by key under the user's cache folder,
never a path made of anything but a hex digest, and a folder that cannot be written is no
error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_resilibench.base import checked

KEY = "ab" * 32


def test_a_verdict_is_kept_under_the_xdg_cache_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert not checked.is_known("task-sets", KEY)
    checked.remember("task-sets", KEY)
    assert checked.is_known("task-sets", KEY)
    assert (tmp_path / "resilibench" / "checked" / "task-sets" / KEY).is_file()
    assert not checked.is_known("other-kind", KEY)


def test_without_xdg_the_home_cache_folder(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert checked.cache_dir() == tmp_path / ".cache" / "resilibench" / "checked"


@pytest.mark.parametrize(("kind", "key"), [("task-sets", "../" * 21 + "x"),
                                           ("task-sets", KEY + "\n"), ("../x", KEY)])
def test_only_hex_keys_and_plain_kinds_make_a_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, key: str) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    checked.remember(kind, key)
    assert not checked.is_known(kind, key)
    assert list(tmp_path.rglob("*")) == []


def test_an_unwritable_cache_folder_is_no_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "blocked").write_text("a file where a folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "blocked"))
    checked.remember("task-sets", KEY)
    assert not checked.is_known("task-sets", KEY)
