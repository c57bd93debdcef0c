"""Options a task states in words (core/wording.py, issue 34): the default set's texts word
them, the Inputs block leaves them out, a reader of the text finds them, and no string match
of a value finds one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_resilibench.core.prompts import Variant, parse_task_inputs, render_prompt
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks
from pytest_resilibench.core.wording import PHRASES, WORDED_PARAMS, read_worded
from pytest_resilibench.runtime.agents.builtin import _inputs


@pytest.fixture(scope="module")
def default_tasks() -> list[Task]:
    return list(load_tasks())


def test_every_phrase_reads_back_as_its_value_and_no_other() -> None:
    for param, by_value in PHRASES.items():
        for value, phrases in by_value.items():
            for phrase in phrases:
                assert read_worded(f"Please {phrase}, then stop.") == {param: value}, phrase


def test_no_phrase_gives_a_value_away_to_a_string_match() -> None:
    """A phrase never contains a value of its parameter (`mean` in `meaningful` aside: whole
    words), so matching values against the text finds nothing."""
    for param, by_value in PHRASES.items():
        values = [str(v).lower() for v in by_value]
        for phrases in by_value.values():
            for phrase in phrases:
                words = set(re.findall(r"[\w-]+", phrase.lower()))
                assert not words & set(values), (param, phrase)


def test_default_tasks_word_their_options_and_the_inputs_block_leaves_them_out(
    default_tasks: list[Task],
) -> None:
    worded = [t for t in default_tasks if t.worded]
    assert len(worded) >= 0.9 * len(default_tasks)  # nearly every task has one
    for task in worded[::7]:
        assert set(task.worded) <= WORDED_PARAMS
        stated = read_worded(task.description)
        for key in task.worded:
            assert stated[key] == task.inputs[key]
        text = render_prompt(task, Variant("baseline")).messages[-1]["content"]
        shown = parse_task_inputs(text)
        assert shown == task.shown_inputs and not set(shown) & set(task.worded)
        # The built-in agents read the words back: all the task's values, as before.
        assert _inputs(text) == dict(task.inputs)


def test_the_paper_set_shows_every_input_as_before() -> None:
    for task in list(load_tasks(TASK_SETS["paper"]))[::50]:
        assert task.worded == () and task.shown_inputs == dict(task.inputs)
        assert "worded" not in task.to_json()
        assert read_worded(task.description) == {}


def test_worded_keys_round_trip_through_json(default_tasks: list[Task]) -> None:
    task = next(t for t in default_tasks if t.worded)
    assert Task.from_json(task.to_json()).worded == task.worded


def _read_phrase_by_phrase(text: str) -> dict[str, object]:
    """`read_worded` as it was written first: a search a phrase, the earliest hit of each
    parameter (the longest phrase where two start at one place)."""
    found: dict[str, object] = {}
    for param, by_value in PHRASES.items():
        pairs = sorted(((p, v) for v, phrases in by_value.items() for p in phrases),
                       key=lambda pair: -len(pair[0]))
        hits = [(m.start(), value) for phrase, value in pairs
                if (m := re.search(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", text,
                                   re.IGNORECASE))]
        if hits:
            found[param] = min(hits, key=lambda hit: hit[0])[1]
    return found


_PIECES = [p for by_value in PHRASES.values() for phrases in by_value.values()
           for p in phrases] + ["x", "-", "a-", "Totals-", "AVERAGES", "the", ","]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=8), st.sampled_from([" ", "", "-"]))
def test_one_search_a_parameter_reads_as_a_search_a_phrase(pieces: list[str], sep: str) -> None:
    text = sep.join(pieces)
    assert read_worded(text) == _read_phrase_by_phrase(text)


def test_default_task_texts_read_as_a_search_a_phrase(default_tasks: list[Task]) -> None:
    for task in default_tasks[::7]:
        assert read_worded(task.description) == _read_phrase_by_phrase(task.description)
