"""Every help screen prints (argparse %-formats help texts: one stray "%" in an option's
help made `pytest --help` crash with a traceback instead of listing the options)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_resilibench.cli import build_parser


def test_pytest_help_lists_every_option() -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--resili-max-infra-errors" in done.stdout
    assert "share of its episodes (2%)" in " ".join(done.stdout.split())


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", _commands())
def test_every_command_prints_its_help(command: str, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args([command, "--help"])
    assert stop.value.code == 0
    assert f"resilibench {command}" in capsys.readouterr().out
