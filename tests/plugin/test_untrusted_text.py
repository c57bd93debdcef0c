"""Untrusted text is data: a real run whose `py:` agent (its `name` and its errors) and whose
OpenAI-compatible server (its error bodies) say hostile things (escape sequences, BEL, NUL,
bidi overrides, HTML, table pipes, backticks, a 16 KB line). No raw control character reaches
the terminal (`-v` lines, tables, headline) nor `resilibench report`'s output, every line there
is bounded, the markdown report and the GitHub job summary render the text inert, the HTML
report escapes it, and the JSON report keeps it byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from markdown_it import MarkdownIt

from pytest_resilibench.runtime.agents.builtin import make_builtin
from pytest_resilibench.runtime.protocol import ModelReply, ModelRequest
from pytest_resilibench.servers.testserver import OpenAITestServer
from tests.unit.test_safe_text import HOSTILE, RAW_CONTROLS

# The agent's name, which the tables and the headline show for its spec: 16 KB of it.
NAME = "\x1b[31mred|name`<script>alert('n')</script>" + "N" * 16384
AGENT = f'''
import itertools

HOSTILE = {HOSTILE!r}
_said = itertools.count()


class Hostile:
    name = {NAME!r}

    async def complete(self, request):
        raise ValueError(said(HOSTILE, next(_said)))


def said(texts, i):
    """Every text, the i-th first: each error different (a row of its own), each holding all."""
    return " ~ ".join(texts[i % len(texts):] + texts[:i % len(texts)])


def make():
    return Hostile()
'''
ALLOWED_TAGS = {"<br>", "<details>", "</details>", "<summary>", "</summary>"}


def check_terminal(text: str, where: str) -> None:
    raw = sorted(repr(c) for c in RAW_CONTROLS & set(text))
    assert not raw, f"raw {raw} in {where}"
    longest = max(len(line) for line in text.splitlines())
    assert longest < 4096, f"a {longest}-character line in {where}"


def check_markdown(text: str, where: str) -> None:
    """Parsed by markdown-it (CommonMark + GFM tables): no tag but the report's own, no code
    span, no link, and every table row exactly as wide as its header."""
    parser = MarkdownIt("commonmark").enable("table")
    tokens = parser.parse(text)
    tags = {t.content.strip() for tok in tokens for t in [tok, *(tok.children or [])]
            if t.type in ("html_inline", "html_block")}
    assert tags <= ALLOWED_TAGS | {t for t in tags if t.startswith("<details><summary>")}, \
        (where, tags - ALLOWED_TAGS)
    rendered = parser.render(text)
    for bad in ("<script", "<img", "<a href=\"https://evil", "<code>"):
        assert bad not in rendered, (where, bad)
    assert not RAW_CONTROLS & set(text), where
    widths: list[int] = []
    for tok in tokens:
        if tok.type == "tr_open":
            widths.append(0)
        elif tok.type in ("th_open", "td_open"):
            widths[-1] += 1
        elif tok.type == "table_close":
            assert len(set(widths)) == 1, (where, widths)
            widths = []
    assert rendered.count("<table>") == rendered.count("</table>"), where


def said(texts: list[str], i: int) -> str:
    """Every text, the i-th first: each error different (a row of its own), each holding all."""
    return " ~ ".join(texts[i % len(texts):] + texts[:i % len(texts)])


def refuse_later_turns(hostile: list[str]) -> object:
    """A server policy: the first turn (and the start-up probe) answered, every later one
    refused with all the hostile texts in the 400's error body."""
    adaptive = make_builtin("adaptive")
    turns = iter(range(10**6))

    async def policy(request: ModelRequest) -> ModelReply:
        if any(m.get("role") == "assistant" for m in request.messages):
            raise ValueError(said(hostile, next(turns)))
        return await adaptive.complete(request)

    return policy


def test_hostile_text_reaches_every_output_as_data(
        suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = suite.mkdir("outside")
    (outside / "hostile_agents.py").write_text(AGENT)
    suite.syspathinsert(outside)
    summary = suite.path / "job-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-untrusted-text-0123456789")
    report = suite.path / "run.json"
    # A server sends UTF-8, which cannot hold a lone surrogate (the agent's errors do).
    from_server = [text.replace("\ud800", "") for text in HOSTILE]
    policy = refuse_later_turns(from_server)
    with OpenAITestServer({"o3": policy}) as server:  # type: ignore[dict-item]
        result = suite.runpytest(
            "-v", "--color=no", "-p", "no:cacheprovider", "--resili-sample=1",
            "--resili-variants=optimal", "--resili-task-types=basic_task",
            "--resili-model=py:hostile_agents:make,o3", f"--resili-base-url={server.base_url}",
            f"--resili-report={report}")
    terminal = result.stdout.str()
    data = json.loads(report.read_text())
    # The run met the text: agent errors and infra errors carrying it, kept whole in the data.
    agent_errors = {ep["agent_error"] for ep in data["episodes"] if ep.get("agent_error")}
    infra_errors = {ep["infra_error"] for ep in data["episodes"] if ep.get("infra_error")}
    # (The runtime and the provider cut an error line; what is left is kept as said.)
    for errors in (agent_errors, infra_errors):
        assert len(errors) == 3 and any(HOSTILE[0] in e for e in errors), sorted(errors)
        assert all("\x07" in e and "<script>" in e for e in errors), sorted(errors)
    assert {ep["model"] for ep in data["episodes"]} == {"py:hostile_agents:make", "o3"}
    assert terminal.count("AGENT-ERROR (") + terminal.count("INFRA-ERROR (") > 2, terminal[-3000:]
    check_terminal(terminal + result.stderr.str(), "the run's terminal")
    assert "\\x1b[2J\\x1b[31mFAKE" in terminal  # shown as what it is
    assert "\\x1b[31mred|name`<script>" in terminal  # the agent's name too, cut short
    assert "N" * 100 in terminal and "N" * 4000 not in terminal

    check_markdown(summary.read_text(), "the job summary")
    md, page = suite.path / "run.md", suite.path / "run.html"
    cli = subprocess.run(
        [sys.executable, "-m", "pytest_resilibench.cli", "report", str(report),
         "--markdown", str(md), "--html", str(page)],
        cwd=suite.path, capture_output=True, text=True, check=True)
    check_terminal(cli.stdout + cli.stderr, "resilibench report")
    markdown = md.read_text()
    check_markdown(markdown, "the markdown report")
    assert "a\\|b\\|c" in markdown and "&lt;script&gt;" in markdown
    document = page.read_text()
    assert "<script>alert" not in document and "<img src=x" not in document
    assert "&lt;script&gt;alert(1)" in document or "\\u003cscript" in document
