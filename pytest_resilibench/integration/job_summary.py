"""The GitHub Actions job summary, written by the plugin itself when `GITHUB_STEP_SUMMARY` is
set (docs/ci/github-actions.yml relies on it): the headline, each gate verdict marked passed or
failed, the line naming the rule that set the exit status, and a link to the run's artifacts.

GitHub documents the file as markdown that a step appends to
(docs.github.com, "Adding a job summary"); the link is the run's page, which lists what the
workflow uploaded (built from GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID, default
variables of every job). The shipped workflow adds direct links to each artifact
(docs/ci/github-actions.yml).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_resilibench.integration.session import ResiliSession

__all__ = ["append_job_summary", "job_summary"]


def _artifacts_link() -> str | None:
    server, repo, run = (os.environ.get(k) for k in
                         ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if not (server and repo and run):
        return None
    return f"{server.rstrip('/')}/{repo}/actions/runs/{run}"


def job_summary(state: ResiliSession) -> str:
    """The markdown block for one run; every line that may quote a model's name or a server's
    error escaped (the headline's own, and the gate's here: base/safe_text.py)."""
    from pytest_resilibench.base.safe_text import MARKDOWN_LIMIT, for_markdown
    from pytest_resilibench.reporting import headline

    shown = state.display_summary or state.summary
    assert shown is not None
    head = headline.build(shown, comparison=state.display_comparison,
                          chaos=state.chaos_summary)
    parts = [headline.render_markdown(head).rstrip("\n")]
    if state.gate_results:
        parts.append("**Gate**\n\n" + "\n".join(
            f"- {'❌ **FAILED**' if r.failed else '✅ passed'}: "
            f"{for_markdown(r.line, limit=MARKDOWN_LIMIT)}"
            for r in state.gate_results))
    if state.exit_line:
        parts.append(f"**{for_markdown(state.exit_line, limit=MARKDOWN_LIMIT)}**")
    link = _artifacts_link()
    if link is not None:
        parts.append(f"The JSON and HTML reports are this run's artifacts, listed on [its "
                     f"page]({link})")
    return "\n\n".join(parts) + "\n\n"


def append_job_summary(path: str, state: ResiliSession) -> str | None:
    """Append the block to `path`; None when written, else the line saying why not."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(job_summary(state))
    except OSError as exc:
        return f"resilibench: could not write the job summary {path}: {exc.strerror or exc}"
    return None
