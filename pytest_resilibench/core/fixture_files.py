"""The fixture files on disk: written atomically with their sha256 in `manifest.json`, and
verified against it when read, so a run's `fixture_hash` stands for the bytes that made its
prompts (docs/ARCHITECTURE.md, "Fixtures").

`manifest.json["files"]` maps a file name to `{"sha256", "bytes"}`; every writer of a fixture
file (the task generator, the solver's workflows, the realistic plans) records its entry here,
and keeps the entries and keys other writers added.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_resilibench.base.atomic import atomic_write

__all__ = ["MANIFEST", "FixtureError", "read_manifest", "read_manifest_bytes", "verified_bytes",
           "write_fixture_file"]

MANIFEST = "manifest.json"
_MANIFEST_BYTES = 1 << 20  # a manifest lists a few files: ~1.5 kB


class FixtureError(ValueError):
    """A fixtures directory that is missing, incomplete or corrupt; the message says which
    file and how to make it again."""


def read_manifest(directory: Path) -> dict[str, Any]:
    return read_manifest_bytes(directory)[0]


def read_manifest_bytes(directory: Path) -> tuple[dict[str, Any], bytes]:
    """The manifest and the bytes it was read from (what a verdict on the set is keyed by:
    task_set_check.py); `({}, b"")` when there is none."""
    path = Path(directory) / MANIFEST
    if not path.exists():
        return {}, b""
    if not path.is_file():  # a folder, or a FIFO whose read would wait forever
        raise FixtureError(f"{path} is not a regular file")
    try:
        with path.open("rb") as fh:
            data = fh.read(_MANIFEST_BYTES + 1)
        if len(data) > _MANIFEST_BYTES:
            raise ValueError(f"larger than any manifest, {_MANIFEST_BYTES} bytes")
        manifest = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FixtureError(f"{path} is not a readable JSON manifest ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files", {}), dict):
        raise FixtureError(f"{path} is not a fixtures manifest (no 'files' object)")
    return manifest, data


def write_fixture_file(directory: Path, name: str, data: bytes,
                       manifest_updates: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write one fixture file and record its sha256 (and any other manifest keys given) in
    the directory's manifest; returns the manifest written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(directory)
    files = dict(manifest.get("files", {}))
    files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    manifest.update(manifest_updates or {})
    manifest["files"] = files
    atomic_write(directory / name, data)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    atomic_write(directory / MANIFEST, text.encode())
    return manifest


def verified_bytes(directory: Path, manifest: Mapping[str, Any], name: str) -> bytes:
    """The bytes of a fixture file, checked against the manifest's sha256."""
    path = Path(directory) / name
    entry = manifest.get("files", {}).get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
        raise FixtureError(f"{path}: not listed in {Path(directory) / MANIFEST} (a fixtures "
                           f"directory is written by `resilibench generate` and `solve`)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FixtureError(f"cannot read {path}: {exc.strerror or exc}") from None
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise FixtureError(f"{path} does not match its sha256 in {MANIFEST}: the file was "
                           "changed or damaged; regenerate it (`resilibench generate`/`solve`)")
    return data
