"""A pytest plugin for launches under test (`-p thread_audit`): it writes, to the file named by
`THREAD_AUDIT_OUT`, every `ast.parse` and every import of this package made off the main
thread, and every `ast.parse` of this package's own files on any thread (integration/preload.py
says why each one matters). One line each: `parse|import THREAD NAME`."""

from __future__ import annotations

import ast
import os
import sys
import threading
from typing import Any

_MAIN = threading.main_thread()
_SEEN: list[str] = []
_PARSE = ast.parse


def _package_file(filename: object) -> bool:
    return f"{os.sep}pytest_resilibench{os.sep}" in str(filename)


def _audited_parse(source: Any, filename: Any = "<unknown>", *args: Any, **kwargs: Any) -> Any:
    thread = threading.current_thread()
    if thread is not _MAIN or _package_file(filename):
        _SEEN.append(f"parse {thread.name} {filename}")
    return _PARSE(source, filename, *args, **kwargs)


def _on_event(event: str, args: tuple[Any, ...]) -> None:
    if event == "import" and threading.current_thread() is not _MAIN:
        name = str(args[0])
        if name == "pytest_resilibench" or name.startswith("pytest_resilibench."):
            _SEEN.append(f"import {threading.current_thread().name} {name}")


ast.parse = _audited_parse  # pytest's rewriter calls `ast.parse` through the module
sys.addaudithook(_on_event)


def pytest_unconfigure(config: Any) -> None:
    out = os.environ.get("THREAD_AUDIT_OUT")
    if out:
        with open(out, "a", encoding="utf-8") as file:
            file.writelines(f"{line}\n" for line in _SEEN)
