"""Secrets are never written: a real run against a server that echoes the request's
`Authorization` header and URL in its error bodies (as real servers do), with an API key or a
password in the base URL's user info (which httpx sends as an HTTP Basic header, in place of a
key's), and a key in a header of `--resili-model-args`; no output of the run (the model-call
cache, the JSON report, JUnit XML, the HTML and markdown reports, the terminal) holds any of
them, nor their base64."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest
from pytest_resilibench.servers.testserver import OpenAITestServer

KEY = "sk-secretstest-KEY0123456789abcdef"
PASSWORD = "SECRETPASS"
HEADER_KEY = "hdr-secret-7f3a9c2e51"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
SECRETS = {
    "the API key": KEY,
    "the password": PASSWORD,
    "the Basic credential": BASIC,
    "the API key's base64": base64.b64encode(KEY.encode()).decode(),
    "the header key": HEADER_KEY,
    "the header key's base64": base64.b64encode(HEADER_KEY.encode()).decode(),
}


def refuse_later_turns(request: ModelRequest) -> None:
    """Every episode's first turn (and the start-up probe) is answered, its second refused:
    a 400, whose body the echoing server ends with the request's Authorization header."""
    if any(m.get("role") == "assistant" for m in request.messages):
        raise ValueError("refused")


@pytest.mark.parametrize("user_info", [True, False], ids=["url-user-info", "bearer-key"])
def test_no_output_of_a_run_holds_a_secret(pytester: pytest.Pytester, user_info: bool,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    suites = Path(__file__).resolve().parents[2] / "suites"
    (pytester.path / "suites").mkdir()
    for name in ("conftest.py", "test_resilibench.py"):
        (pytester.path / "suites" / name).write_text((suites / name).read_text())
    adaptive = make_builtin("adaptive")

    async def policy(request: ModelRequest) -> ModelReply:
        refuse_later_turns(request)
        return await adaptive.complete(request)

    out = pytester.path / "out"
    # A key, or user info (never both: httpx's Basic header from the user info would replace
    # the key's, and the provider refuses the pair).
    if user_info:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAITestServer({"o3": policy}, echo_request=True) as server:
        base_url = server.base_url.replace("://", f"://user:{PASSWORD}@") if user_info \
            else server.base_url
        result = pytester.runpytest_subprocess(
            "suites", "-p", "no:cacheprovider", "-p", "no:randomly", "-v", "-rA",
            "--resili-model=o3", f"--resili-base-url={base_url}", "--resili-sample=1",
            "--resili-variants=optimal", "--resili-task-types=basic_task",
            f'--resili-model-args={{"extra_headers": {{"api-key": "{HEADER_KEY}"}}}}',
            f"--resili-cache={out / 'calls.sqlite'}", f"--resili-report={out / 'r.json'}",
            f"--junitxml={out / 'j.xml'}")
    text = result.stdout.str() + result.stderr.str()
    # The run did what it is here for: cached replies, and echoed errors that got reported.
    assert server.stats.replies > 1 and server.stats.refused == {}, text[-3000:]
    echoed = "Authorization: Basic ***" if user_info else "Authorization: Bearer ***"
    assert echoed in (out / "r.json").read_text(), text[-3000:]
    report = subprocess.run(
        [sys.executable, "-m", "pytest_resilibench.cli", "report", str(out / "r.json"),
         "--html", str(out / "r.html"), "--markdown", str(out / "r.md")],
        cwd=pytester.path, capture_output=True, text=True, check=True)
    outputs = {"the terminal": text.encode(), "resilibench report": report.stdout.encode()}
    outputs |= {str(path.relative_to(pytester.path)): path.read_bytes()
                for path in pytester.path.rglob("*") if path.is_file()}
    assert {"out/calls.sqlite", "out/r.json", "out/j.xml", "out/r.html", "out/r.md"} <= set(
        outputs)
    leaks = sorted(f"{what} in {where}" for where, data in outputs.items()
                   for what, secret in SECRETS.items() if secret.encode() in data)
    assert not leaks, leaks
