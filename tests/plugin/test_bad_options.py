"""Every bad option value ends a real pytest process with one line naming the option, exit 4
(usage error), no traceback (integration/options.py); and no such line, nor anything else
the process prints, holds a secret the value carried: an `sk-proj-` key, a `Bearer` token,
the live services' key (base/redact.py, as the report is redacted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_resilibench.integration import options

ROOT = Path(__file__).resolve().parents[2]
SK = "sk-proj-Zq8xW3vK9mN2pL5tR7yB1cD4"
BEARER = "Bearer tok_9f8e7d6c5b4a39281706"
LIVE = "live-7Hq2ZpX9wV4s"  # matches no pattern: masked because it is the live key
SECRETS = (SK, BEARER.split()[1], LIVE)
PAYLOAD = f"{SK}|{BEARER}|{LIVE}"


def run_pytest(cwd: Path, *args: str, env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    """A real pytest process on this tree (PYTHONPATH reaches it: not an installed copy)."""
    environment = {**os.environ, **(env or {}),
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-p", "no:xdist", *args], cwd=cwd, env=environment, capture_output=True, text=True,
        timeout=300, check=False)


def assert_one_usage_line(done: subprocess.CompletedProcess[str], option: str) -> str:
    text = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, text[-2000:]
    assert "Traceback" not in text and "INTERNALERROR" not in text, text[-2000:]
    said = [line for line in text.splitlines() if option in line]
    assert len(said) == 1, text[-2000:]
    return said[0]


# The values: accepted silently before.
@pytest.mark.parametrize(("argument", "says"), [
    ("--resili-sample=99999999999999999999", "(a 64-bit integer)"),
    ("--resili-sample=2000", "has at most 336 (use all)"),
    ("--resili-base-success=0.9,,0.8", "has an empty item"),
    ("--resili-max-turns=100000000", "the most this option takes, 1000"),
    ("--resili-model=o3,o3", "o3 given twice"),
    ("--resili-variants=optimal,optimal", "optimal given twice"),
    ("--resili-base-url=http://[::1", "is not an http(s) URL"),
    ("--resili-live-base-url=jokes=http://h:99999", "is not an http(s) URL"),
])
def test_a_bad_value_is_one_line_and_a_usage_error(tmp_path: Path, argument: str,
                                                   says: str) -> None:
    done = run_pytest(tmp_path, argument)
    line = assert_one_usage_line(done, argument.partition("=")[0])
    assert says in line, line


def _malformed(name: str, tmp: Path) -> str:
    """A value of `--resili-NAME` that is refused and carries every secret."""
    a_file = tmp / "a-file"
    a_file.write_text("")
    special = {
        "model": f"o3,,{PAYLOAD}",
        "base-url": f"http://[{PAYLOAD}",
        "live-server": f"http://[{PAYLOAD}",
        "model-args": f'{{"api_key": "{SK}", "auth": "{BEARER}", "k": "{LIVE}",',
        "report": f"{a_file}/{PAYLOAD}/r.json",
        "cache": str(tmp / PAYLOAD),  # made a directory below: not a cache file
        "resume": f"{tmp / PAYLOAD}.json",
    }
    return special.get(name, PAYLOAD)


def _valued_options() -> list[str]:
    return [name for name, parse, *_ in options._OPTIONS if parse is not None]


@pytest.mark.parametrize("name", [*_valued_options(), "live-base-url", "model-args-list",
                                  "prices-json"])
def test_no_usage_error_prints_a_secret(tmp_path: Path, name: str) -> None:
    value = {"live-base-url": PAYLOAD, "model-args-list": f'["{SK}", "{BEARER}", "{LIVE}"]',
             "prices-json": f'{{"o3": "{SK}", "x": "{BEARER}", "y": "{LIVE}"}}'
             }.get(name) or _malformed(name, tmp_path)
    option = {"model-args-list": "model-args", "prices-json": "prices"}.get(name, name)
    if option == "cache":
        Path(value).mkdir()
    # The live key given after the bad value: it is known when the bad value is refused.
    done = run_pytest(tmp_path, f"--resili-{option}={value}", f"--resili-live-api-key={LIVE}")
    text = done.stdout + done.stderr
    assert_one_usage_line(done, f"--resili-{option}")
    leaks = [secret for secret in SECRETS if secret in text]
    assert not leaks, text[-2000:]


def test_the_live_key_from_the_environment_is_masked_too(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, f"--resili-variants={LIVE}",
                      env={options.LIVE_KEY_ENV: LIVE})
    assert_one_usage_line(done, "--resili-variants")
    assert LIVE not in done.stdout + done.stderr
