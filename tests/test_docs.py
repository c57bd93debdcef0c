"""The documentation names only what exists."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_resilibench.integration.options import _OPTIONS

ROOT = Path(__file__).resolve().parents[1]


def test_the_docs_name_only_real_options() -> None:
    """Every `--resili-*` flag the README and the CI example use is one the plugin has."""
    known = {f"--resili-{name}" for name, *_ in _OPTIONS} | {
        "--resili-live-base-url", "--resili-live-api-key"}
    for doc in (ROOT / "README.md", ROOT / "docs" / "ci" / "github-actions.yml",
                ROOT / "docs" / "CHAOS.md"):
        used = set(re.findall(r"--resili-[a-z-]*[a-z]", doc.read_text(encoding="utf-8")))
        assert used and used <= known, (doc.name, sorted(used - known))


def test_comments_cite_files_of_this_repository() -> None:
    """A comment that cites a file of docs/ names one that exists; none cites the spec outside
    the repository (its words are in docs/BENCHMARK.md)."""
    sources = [p for folder in ("pytest_resilibench", "solver", "tests", "bench")
               for p in (ROOT / folder).rglob("*.py")]
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert "SPEC" + " \N{SECTION SIGN}" not in text and "SPEC" + ".md" not in text, path
        for cited in re.findall(r"\bdocs/[A-Z][A-Z_]*\.md", text):
            assert (ROOT / cited).is_file(), (path, cited)
