"""The published JSON Schemas of a task set's files (core/task_set_schemas.py): valid
draft 2020-12 schemas, printed by `resilibench schema NAME`, met by what the generator and
the solver write, and naming the registry's tools."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import jsonschema
import pytest

from pytest_resilibench.cli import main
from pytest_resilibench.core.faults import REALISTIC_PLANS_SCHEMA
from pytest_resilibench.core.registry import default_registry
from pytest_resilibench.core.task_set_schemas import (
    MANIFEST_SCHEMA,
    SOLVER_REPORT_SCHEMA,
    TASK_SET_SCHEMAS,
    WORKFLOWS_SCHEMA,
    manifest_schema,
    realistic_workflow_schema,
    solver_report_schema,
    task_schema,
    workflow_schema,
)
from pytest_resilibench.core.tasks import TASK_SCHEMA, TASK_SETS


@pytest.mark.parametrize("name", sorted(TASK_SET_SCHEMAS))
def test_resilibench_schema_prints_each_file_s_schema(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", name]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == TASK_SET_SCHEMAS[name]()
    jsonschema.Draft202012Validator.check_schema(printed)


def test_schema_rejects_an_unknown_document(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["schema", "everything"])
    assert caught.value.code == 2
    assert "solver-report" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(TASK_SETS))
def test_the_shipped_files_meet_their_schemas(name: str) -> None:
    """A sample of each shipped set's lines, and its manifest and solver report (the content
    check covers every line: tests/unit/test_task_set_check.py)."""
    directory = Path(TASK_SETS[name])
    for file, schema in (("tasks.jsonl.gz", task_schema()),
                         ("workflows.jsonl.gz", workflow_schema()),
                         ("realistic_workflows.jsonl.gz", realistic_workflow_schema())):
        with gzip.open(directory / file, "rt", encoding="utf-8") as fh:
            for line in itertools.islice(fh, 0, None, 97):
                jsonschema.validate(json.loads(line), schema)
    jsonschema.validate(json.loads((directory / "manifest.json").read_text()),
                        manifest_schema())
    jsonschema.validate(json.loads((directory / "solver_report.json").read_text()),
                        solver_report_schema())


def test_the_schema_words_are_the_writers_and_the_tools_the_registry_s() -> None:
    from pytest_resilibench.solver.generate import MANIFEST_SCHEMA as written_manifest
    from pytest_resilibench.solver.solve import REPORT_SCHEMA
    from pytest_resilibench.solver.solve import WORKFLOWS_SCHEMA as written

    assert (written_manifest, written, REPORT_SCHEMA) == (
        MANIFEST_SCHEMA, WORKFLOWS_SCHEMA, SOLVER_REPORT_SCHEMA)
    assert REALISTIC_PLANS_SCHEMA == "resilibench.realistic_workflows/1"
    assert TASK_SCHEMA == "resilibench.task/1"
    tools = list(default_registry().names)
    assert task_schema()["properties"]["required_tools"]["items"] == {"enum": tools}
    step = workflow_schema()["properties"]["optimal"]["properties"]["steps"]["items"]
    assert step["properties"]["tool"] == {"enum": tools}


@pytest.mark.parametrize("task_id", ["t0001\n", "t 1", "../t1", "x" * 65, "", "-t1"])
def test_an_id_is_a_plain_word(task_id: str) -> None:
    """Ids name test items and episodes: no newline (not even a final one, which Python's
    `$` lets through), space, path or option."""
    pattern = task_schema()["properties"]["id"]
    assert not jsonschema.Draft202012Validator(pattern).is_valid(task_id)
    assert jsonschema.Draft202012Validator(pattern).is_valid("t0001")
