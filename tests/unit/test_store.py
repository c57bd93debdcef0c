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
