"""The ResiliBench suite of this repository: `pytest suites` (or a bare `pytest` here, whose
testpaths name this folder). The test itself lives in the package
(`pytest_resilibench/integration/suite.py`), which the plugin also collects on its own in a
repository without this file."""

from pytest_resilibench.integration.suite import test_resilibench

__all__ = ["test_resilibench"]
