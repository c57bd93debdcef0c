"""Collecting this folder asks for the benchmark, as a `--resili-*` option would: the plugin is
inert otherwise (it runs in every pytest of the venv), and under xdist the controller must know
before it collects nothing itself."""

import pytest

from pytest_resilibench.plugin import ask_for_benchmark


def pytest_configure(config: pytest.Config) -> None:
    ask_for_benchmark(config)
