"""The README's examples are real: every item id it names matches the task it names, and every
`-k` slice it shows selects items of the suite."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from pytest_resilibench.core.flaws import FLAWS
from pytest_resilibench.core.tasks import DIFFICULTIES, TASK_TYPES, load_tasks

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ITEM_ID = re.compile(
    r"\b[A-Za-z0-9_.]+-(?:baseline|cot|optimal|flawed-(?P<flaw>[a-z_]+?))"
    rf"(?:-(?:light|medium|severe))?-(?P<type>{'|'.join(TASK_TYPES)})"
    rf"-(?P<difficulty>{'|'.join(DIFFICULTIES)})-(?P<task>t\d{{4}})(?:-b[\d.]+)?-r\d+\b")


def _item_ids() -> list[tuple[str, re.Match[str]]]:
    return [(doc.name, m) for doc in DOCS for m in ITEM_ID.finditer(doc.read_text())]


def test_the_readme_names_item_ids() -> None:
    assert any(name == "README.md" for name, _ in _item_ids())


@pytest.mark.parametrize(("doc", "match"), [pytest.param(d, m, id=f"{d}:{m[0]}")
                                            for d, m in _item_ids()])
def test_item_ids_in_the_docs_match_their_tasks(doc: str, match: re.Match[str]) -> None:
    task = {t.id: t for t in load_tasks()}[match["task"]]
    assert (match["type"], match["difficulty"]) == (task.type, task.difficulty), (
        f"{doc}: {match[0]} names {match['type']}/{match['difficulty']}, but {task.id} is "
        f"{task.type}/{task.difficulty}")
    assert match["flaw"] is None or match["flaw"] in FLAWS


def _slices() -> list[list[str]]:
    """The arguments of every `pytest ... -k ...` line of the README's code blocks."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    out = []
    for line in (ln for block in blocks for ln in block.splitlines()):
        if line.startswith("pytest") and " -k " in line:
            args = shlex.split(line.split("#", 1)[0])[1:]
            out.append([a for a in args if a != "suites"])
    return out


def test_the_readme_shows_slices() -> None:
    assert len(_slices()) >= 4


@pytest.mark.parametrize("args", _slices(), ids=" ".join)
def test_every_readme_slice_selects_items(suite: pytest.Pytester, args: list[str]) -> None:
    result = suite.runpytest("--collect-only", "-q", "--resili-sample=1", "-p",
                             "no:cacheprovider", *args)
    ids = [line for line in result.outlines if "::test_resilibench[" in line]
    assert ids, result.outlines[-3:]
    expression = args[args.index("-k") + 1]
    for word in re.findall(r"[\w:]+", expression):
        if word not in ("and", "or", "not"):
            assert all(word.replace(":", "_") in i for i in ids), (word, ids[:3])
