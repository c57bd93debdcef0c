import json
from typing import Any

import pytest

from pytest_resilibench.core.record import EPISODE_SCHEMA, EpisodeRecord, episode_id

CONTRACT_FIELDS = {
    "id", "model", "variant", "flaw", "severity", "task_id", "task_type", "difficulty",
    "repeat", "seed", "base_success", "tool_mode", "max_turns", "outcome", "conditions",
    "coverage", "order_adherence", "turns", "tool_calls", "errors_met", "errors_recovered",
    "deviation", "tokens", "sim_time_s", "wall_time_s", "stop_reason", "infra_error",
    "messages", "calls",
}


def record() -> EpisodeRecord:
    return EpisodeRecord(
        id=episode_id(model="builtin:oracle", variant="flawed-missing_step", severity="light",
                      task_type="simple_task", difficulty="easy", task_id="t0001", repeat=2),
        model="builtin:oracle", variant="flawed-missing_step", flaw="missing_step",
        severity="light", task_id="t0001", task_type="simple_task", difficulty="easy",
        repeat=2, seed=7, base_success=0.8, tool_mode="text", max_turns=10,
        outcome="partial", messages=[{"role": "user", "content": "hi"}],
        calls=[{"tool": "file_operations_reader", "ok": True, "turn": 1}],
    )


def test_json_round_trip_and_contract_fields() -> None:
    rec = record()
    data = json.loads(json.dumps(rec.to_json()))
    assert data["schema"] == EPISODE_SCHEMA
    assert set(data) >= CONTRACT_FIELDS
    assert EpisodeRecord.from_json(data) == rec


def test_summary_drops_the_trajectory() -> None:
    summary = record().summary_json()
    assert "messages" not in summary and "calls" not in summary
    assert summary["outcome"] == "partial" and summary["schema"] == EPISODE_SCHEMA


def test_from_json_refuses_other_schemas() -> None:
    data = record().to_json()
    data["schema"] = "resilibench.episode/0"
    with pytest.raises(ValueError, match="schema"):
        EpisodeRecord.from_json(data)


def test_ids_are_stable_distinct_and_in_the_item_id_format() -> None:
    where: dict[str, Any] = {"task_type": "simple_task", "difficulty": "easy", "task_id": "t1"}
    a = episode_id(model="builtin:oracle", variant="optimal", repeat=0, **where)
    assert a == "builtin_oracle-optimal-simple_task-easy-t1-r0"
    assert a == episode_id(model="builtin:oracle", variant="optimal", repeat=0, **where)
    assert len({a, episode_id(model="builtin:oracle", variant="optimal", repeat=1, **where),
                episode_id(model="m", variant="optimal", repeat=0, **where),
                episode_id(model="builtin:oracle", variant="flawed-missing_step", repeat=0,
                           severity="light", **where),
                episode_id(model="builtin:oracle", variant="flawed-missing_step", repeat=0,
                           severity="severe", **where),
                episode_id(model="builtin:oracle", variant="optimal", repeat=0,
                           base_success=0.6, **where)}) == 6
    assert record().is_error is False


def test_the_readers_field_types_are_the_published_schemas() -> None:
    from pytest_resilibench.core.record import _FIELD_TYPES, episode_problem
    from pytest_resilibench.reporting.schemas import episode_schema

    json_types = {str: "string", int: "integer", float: "number", dict: "object",
                  list: "array"}
    properties = episode_schema()["properties"]
    for name, (types, _nullable) in _FIELD_TYPES.items():
        spec = properties[name]
        declared = spec.get("type") or {json_types[type(v)] for v in spec["enum"]}
        declared = {declared} if isinstance(declared, str) else set(declared)
        if "number" in declared:  # a JSON number may be an integer
            declared.add("integer")
        assert {json_types[t] for t in types} <= declared, name
    assert episode_problem({"model": "m", "variant": "v", "task_id": "t",
                            "outcome": "full"}) is None
    assert "'turns' is bool" in str(episode_problem({"model": "m", "variant": "v",
                                                     "task_id": "t", "outcome": "full",
                                                     "turns": True}))
    base = {"model": "m", "variant": "v", "task_id": "t", "outcome": "partial"}
    assert episode_problem({**base, "penalties": {"excess_runs": 2}}) is None
    assert "penalty counts" in str(episode_problem({**base, "penalties": {"excess_runs": "2"}}))
    assert episode_problem({**base, "recovery": {"retried": 1}}) is None
    assert "recovery counts" in str(episode_problem({**base, "recovery": {"retried": 1.5}}))


def test_a_packed_record_is_the_record_its_trajectory_unpacked_when_read() -> None:
    """`pack`/`from_pack` (a helper process's records, integration/ahead.py): the same record
    by every reading (fields, equality, JSON, copies, pickles); its trajectory stays packed
    until something reads it, and an unknown attribute is still an AttributeError."""
    import copy
    import pickle

    original = record()
    original.keep_report_text("{}")
    state, trajectory = pickle.loads(pickle.dumps(original.pack()))
    packed = EpisodeRecord.from_pack(state, trajectory)
    assert "messages" not in vars(packed) and packed.outcome == "partial"
    assert packed.report_text() == "{}"
    assert packed.summary_json() == original.summary_json()
    assert "messages" not in vars(packed)  # the summary leaves the trajectory packed
    for copied in (copy.deepcopy(packed), pickle.loads(pickle.dumps(packed)),
                   copy.copy(EpisodeRecord.from_pack(state, trajectory))):
        assert copied == original and copied.to_json() == original.to_json()
    assert packed.messages == original.messages and packed.calls == original.calls
    assert packed == original and "_packed_trajectory" not in vars(packed)
    with pytest.raises(AttributeError, match="no attribute 'outcom'"):
        packed.outcom  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError):
        EpisodeRecord.__new__(EpisodeRecord).messages  # noqa: B018
