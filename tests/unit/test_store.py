"""The episode store: slim rows in memory, whole records back from the spool in id order."""

from __future__ import annotations

import json

from pytest_resilibench.integration.store import SLIM_FIELDS, EpisodeStore


def episode(i: str) -> dict[str, object]:
    return {"id": i, "model": "builtin:follower", "outcome": "full", "flaw": None,
            "tokens": {"prompt": 3}, "messages": [{"role": "user", "content": "x\ny"}],
            "deviation": {"big": list(range(50))}}


def test_rows_are_slim_and_records_come_back_whole_in_id_order() -> None:
    store = EpisodeStore()
    try:
        for i in ("c", "a", "b"):
            store.add(json.dumps(episode(i)))
        store.sort()
        assert [row["id"] for row in store.rows] == ["a", "b", "c"]
        assert set(store.rows[0]) <= set(SLIM_FIELDS)
        assert "messages" not in store.rows[0] and store.rows[0]["flaw"] is None
        assert [json.loads(line) for line in store.full_lines()] == [
            episode("a"), episode("b"), episode("c")]
        assert len(store) == 3
    finally:
        store.close()


def test_repeated_strings_are_shared() -> None:
    store = EpisodeStore()
    try:
        store.add(json.dumps(episode("a")))
        store.add(json.dumps(episode("b")))
        assert store.rows[0]["model"] is store.rows[1]["model"]
    finally:
        store.close()


def test_a_slim_text_is_its_own_row_in_the_same_order_with_strings_shared() -> None:
    """What workers send without a JSON report (the slim fields alone) makes the row a whole
    record makes."""
    whole, slim = EpisodeStore(), EpisodeStore(records=False)
    try:
        for i in ("a", "b"):
            full = episode(i)
            whole.add(json.dumps(full))
            slim.add(json.dumps({k: full[k] for k in SLIM_FIELDS if k in full}))
        assert slim.rows == whole.rows
        assert [list(row) for row in slim.rows] == [list(row) for row in whole.rows]
        assert slim.rows[0]["model"] is slim.rows[1]["model"] is whole.rows[0]["model"]
    finally:
        whole.close()
        slim.close()


def test_adding_after_reading_appends_and_keeps_unicode_and_newlines() -> None:
    store = EpisodeStore()
    try:
        store.add(json.dumps(episode("a"), ensure_ascii=False, indent=1))
        assert [json.loads(line)["id"] for line in store.full_lines()] == ["a"]
        late = {**episode("b"), "model": "modèle"}
        store.add(json.dumps(late, ensure_ascii=False))
        assert [json.loads(line) for line in store.full_lines()] == [episode("a"), late]
    finally:
        store.close()


def test_texts_added_later_are_parsed_in_batches_and_none_is_lost() -> None:
    """`add_later` parses when a batch is full or the rows are read; a bad text raises then
    and the texts after it stay."""
    import pytest

    from pytest_resilibench.integration.store import PARSE_BATCH

    store = EpisodeStore()
    try:
        for i in range(PARSE_BATCH - 3):
            store.add_later(json.dumps(episode(f"e{i:03d}")))
        assert len(store) == PARSE_BATCH - 3 and store._rows == []  # not parsed yet
        store.add_later("{not json")
        store.add_later(json.dumps(episode("late")))
        with pytest.raises(json.JSONDecodeError):  # the batch is full: parsed now
            store.add_later(json.dumps(episode("x")))
        assert [row["id"] for row in store.rows][-2:] == ["late", "x"]
        assert len(store) == PARSE_BATCH - 1
        assert store.add(json.dumps(episode("now")))["id"] == "now"
        assert [json.loads(line)["id"] for line in store.full_lines()][-3:] == [
            "late", "x", "now"]
    finally:
        store.close()


def test_a_store_without_records_keeps_the_rows_alone() -> None:
    """A run that writes no JSON report keeps no spool: the rows as ever, no records."""
    import pytest

    store = EpisodeStore(records=False)
    try:
        for i in ("b", "a"):
            store.add_later(json.dumps(episode(i)))
        store.sort()
        assert [row["id"] for row in store.rows] == ["a", "b"] and len(store) == 2
        with pytest.raises(RuntimeError, match="keeps no records"):
            next(store.full_lines())
    finally:
        store.close()
