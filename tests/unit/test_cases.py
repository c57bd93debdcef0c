"""Cases: stratified deterministic sampling and stable, sliceable ids."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from pytest_resilibench.core.tasks import DIFFICULTIES, TASK_TYPES, load_tasks
from pytest_resilibench.integration.cases import build_cases, sample_tasks, variants_of
from pytest_resilibench.integration.options import RunConfig

TASKS = list(load_tasks())


def test_sample_is_stratified_and_seeded() -> None:
    config = RunConfig(sample=4)
    chosen = sample_tasks(TASKS, config)
    cells = Counter((t.type, t.difficulty) for t in chosen)
    assert set(cells) == {(t, d) for t in TASK_TYPES for d in DIFFICULTIES}
    assert set(cells.values()) == {4}
    assert sample_tasks(TASKS, config) == chosen
    other = sample_tasks(TASKS, replace(config, seed=1))
    assert {t.id for t in other} != {t.id for t in chosen}


def test_sample_all_and_filters() -> None:
    assert len(sample_tasks(TASKS, RunConfig(sample=None))) == 5040
    hard = sample_tasks(TASKS, RunConfig(sample=None, difficulties=("hard",),
                                         task_types=("data_pipeline",)))
    assert len(hard) == 336 and {t.difficulty for t in hard} == {"hard"}


def test_variants_expand_flaws_and_severities() -> None:
    config = RunConfig(variants=("optimal", "flawed"), flaws=("missing_step", "tool_misuse"),
                       severities=("light", "severe"))
    labels = [(v.label, v.severity) for v in variants_of(config)]
    assert labels == [("optimal", None), ("flawed-missing_step", "light"),
                      ("flawed-missing_step", "severe"), ("flawed-tool_misuse", "light"),
                      ("flawed-tool_misuse", "severe")]


def test_ids_are_unique_ordered_and_safe() -> None:
    config = RunConfig(models=("o3", "openai:gpt-4o mini"), sample=2, repeats=2)
    cases = build_cases(config, TASKS)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)) == 2 * 10 * 30 * 2
    assert ids[0].startswith("o3-baseline-")
    assert all(set(i) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
               for i in ids)
    assert any(i.startswith("openai_gpt-4o_mini-flawed-semantic_drift-") for i in ids)
    assert build_cases(config, TASKS) == cases
