"""The `resilibench` command on bad input: a number out of range, a busy port, a host that
does not resolve, an unwritable output, a corrupted report: one line and exit 2, never a
traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.core.record import EpisodeRecord

EPISODE = EpisodeRecord(
    id="e0", model="builtin:oracle", variant="optimal", flaw=None, severity=None,
    task_id="t0001", task_type="basic_task", difficulty="easy", repeat=0, seed=0,
    base_success=0.8, tool_mode="text", max_turns=10, outcome="full").summary_json()


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:  # argparse's own exit for a bad value
        main(list(argv))
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(("argv", "message"), [
    (["serve-live", "--port", "99999"], "argument --port: 99999 is not in [0, 65535]"),
    (["serve-live", "--hang-s", "nan"], "argument --hang-s: 'nan' is not a finite number"),
    (["serve-mcp", "--repeat", "-5"], "argument --repeat: -5 is not at least 0"),
    (["serve-mcp", "--base-success", "0"], "argument --base-success: '0' is not a finite"),
    (["serve-openai", "--fault-rate", "1.5"], "argument --fault-rate: '1.5' is not a finite"),
    (["serve-openai", "--latency-ms", "-1"], "argument --latency-ms: '-1' is not a finite"),
    (["report", "r.json", "--confidence", "inf"], "argument --confidence: 'inf' is not a "
     "confidence level"),
    (["report", "r.json", "--max-infra-errors", "-1"], "is not a count of infra errors"),
    (["report", "r.json", "--inconclusive", "maybe"], "'maybe' is not one of pass, fail"),
    (["solve", "--max-turns", "ten"], "argument --max-turns: 'ten' is not an integer"),
])
def test_numeric_flags_are_range_checked(capsys: pytest.CaptureFixture[str], argv: list[str],
                                         message: str) -> None:
    assert message in one_error_line(capsys, *argv)


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.strip()


def test_a_busy_port_and_a_bad_host_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = str(busy.getsockname()[1])
        for command in ("serve-live", "serve-openai"):
            code, err = run_main(capsys, command, "--port", port)
            assert code == 2 and err == (f"resilibench {command}: error: cannot listen on "
                                         f"127.0.0.1:{port}: Address already in use")
    code, err = run_main(capsys, "serve-openai", "--host", "0.0.0.0.0", "--insecure")
    assert code == 2 and err.startswith("resilibench serve-openai: error: cannot listen on "
                                        "0.0.0.0.0:0:")


def test_an_unwritable_output_is_one_line(capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    code, err = run_main(capsys, "generate", "--out", str(not_a_dir / "sub"))
    assert code == 2 and "Not a directory" in err and len(err.splitlines()) == 1
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"schema": "resilibench.report/1", "episodes": [EPISODE]}))
    code, err = run_main(capsys, "report", str(report), "--markdown", str(not_a_dir / "x.md"))
    assert code == 2 and "x.md" in err and len(err.splitlines()) == 1


def _report_text(field: str, raw: str) -> str:
    """A report whose one episode has `field` set to the raw JSON text `raw`."""
    body = json.dumps({"schema": "resilibench.report/1", "episodes": [{**EPISODE, field: 0}]})
    return body.replace(f'"{field}": 0', f'"{field}": {raw}')


@pytest.mark.parametrize("text", [
    '{"schema": "resilibench.report/1", "episodes": ' + "[" * 20_000 + "]" * 20_000 + "}",
    '{"schema": "resilibench.report/1", "episodes": [5]}',  # AttributeError before
    _report_text("tokens", '{"total": 1' + "0" * 4000 + "}"),  # OverflowError before
    _report_text("tokens", '"many"'),  # TypeError before
    _report_text("coverage", '"high"'),
    _report_text("outcome", '["full"]'),
    _report_text("base_success", "NaN"),
])
def test_a_corrupted_report_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                        text: str) -> None:
    report = tmp_path / "r.json"
    report.write_text(text)
    code, err = run_main(capsys, "report", str(report))
    assert code == 2 and err.startswith(f"resilibench report: error: {report}")
    assert len(err.splitlines()) == 1


def test_a_report_with_an_episode_twice_is_refused(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    """Its episode would count twice in every rate (and in `--compare`'s pairs)."""
    other = {**EPISODE, "id": "e1", "task_id": "t0002"}
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"schema": "resilibench.report/1",
                                  "episodes": [EPISODE, other, EPISODE]}))
    code, err = run_main(capsys, "report", str(report))
    assert (code, err) == (2, f"resilibench report: error: {report}: episode id 'e0' appears "
                              "twice (episodes 0 and 2): a report holds each episode once")
    fine = tmp_path / "fine.json"
    fine.write_text(json.dumps({"schema": "resilibench.report/1", "episodes": [EPISODE, other]}))
    code, _ = run_main(capsys, "report", str(fine), "--compare", str(report))
    assert code == 2  # as the reference of a comparison too
