"""Registries and tasks are equal and hashed by identity, so what is derived from one is cached
on the object itself and goes with it (no `id()` that a new object could reuse)."""

from __future__ import annotations

import gc
import weakref

from pytest_resilibench.core import flaws, scoring
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.tasks import Task


def test_a_registry_is_its_own_key_and_its_caches_go_with_it() -> None:
    registry = ToolRegistry(default_registry().tools)
    assert registry != default_registry() and len({registry, default_registry()}) == 2
    ranked = flaws.similar_tools(registry, "file_operations_reader")
    assert ranked == flaws.similar_tools(default_registry(), "file_operations_reader")
    stand_ins = scoring._alternatives("data_processing_validator", registry)
    assert stand_ins == scoring._alternatives("data_processing_validator", default_registry())
    assert registry in flaws._RANKINGS and registry in scoring._STAND_INS
    gone = weakref.ref(registry)
    del registry
    gc.collect()
    assert gone() is None


def test_a_task_is_its_own_key() -> None:
    task = Task(id="t9999", type="simple_task", difficulty="easy", description="d",
                inputs={}, expected_outputs={}, required_tools=("file_operations_reader",))
    twin = Task(id="t9999", type="simple_task", difficulty="easy", description="d",
                inputs={}, expected_outputs={}, required_tools=("file_operations_reader",))
    assert task == task and task != twin and len({task, twin}) == 2
