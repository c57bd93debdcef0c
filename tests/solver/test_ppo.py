"""PPO: a short run (seconds) learns a policy far better than random, reproducibly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pytest_resilibench.solver.ppo import (  # noqa: E402
    PpoConfig,
    TrainResult,
    _autocast,
    greedy_policy,
    load_model,
    train,
)
from pytest_resilibench.solver.vecenv import StructureTables, VecEnv  # noqa: E402

from pytest_resilibench.core.optimum.dp import solve  # noqa: E402
from pytest_resilibench.core.optimum.mdp import TaskMDP  # noqa: E402
from pytest_resilibench.core.registry import default_registry  # noqa: E402
from pytest_resilibench.core.simulator import RECENT_WINDOW  # noqa: E402

# Its tests share one expensive fixture: one worker builds it (make test: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("ppo")

STRUCTURES = [
    ("network_fetcher", "network_poster"),
    ("file_operations_reader", "data_processing_validator", "file_operations_writer"),
    ("file_operations_reader", "data_processing_parser", "integration_queue"),
]
SHORT = PpoConfig(updates=10, n_steps=512, n_envs=32, epochs=3, batch_size=128, d_model=32,
                  layers=2, heads=4, threads=1, precision="bf16")


def random_value(mdp: TaskMDP) -> float:
    """Exact expected success of the uniformly random policy over the closure."""
    trans = mdp.transitions
    done = (np.arange(mdp.n_states) % (mdp.n + 1)) == mdp.n
    v = np.append(done.astype(float), 0.0)
    for turns in range(1, mdp.max_turns + 1):
        late = mdp.max_turns - turns >= RECENT_WINDOW
        q = np.mean([(t.p_late if late else t.p_early) * v[t.on_success]
                     + (1 - (t.p_late if late else t.p_early)) * v[t.on_failure]
                     for t in trans], axis=0)
        v = np.append(np.where(done, 1.0, q), 0.0)
    return float(v[mdp.initial_state().code])


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrainResult, Path]:
    directory = tmp_path_factory.mktemp("ppo")
    config = PpoConfig(**{**SHORT.__dict__, "checkpoint_dir": str(directory),
                          "checkpoint_every": 5})
    return train([TaskMDP(s) for s in STRUCTURES], config, progress=False), directory


def test_a_short_run_beats_random_by_a_clear_margin(trained: tuple[TrainResult, Path]) -> None:
    result, _ = trained
    for structure in STRUCTURES:
        mdp = TaskMDP(structure)
        learned = greedy_policy(result.model, mdp).value
        assert learned >= random_value(mdp) + 0.3
        assert learned >= 0.8 * solve(mdp).value
    assert result.env_steps == SHORT.updates * SHORT.n_steps
    assert {h["stage"] for h in result.history} >= {1, 2}  # the curriculum moved on


def test_checkpoints_restore_the_same_policy(trained: tuple[TrainResult, Path]) -> None:
    result, directory = trained
    path = Path(directory) / "ppo.pt"
    assert path.exists()
    restored = load_model(path, len(default_registry()))
    mdp = TaskMDP(STRUCTURES[0])
    original = greedy_policy(result.model, mdp)
    again = greedy_policy(restored, mdp)
    assert np.array_equal(original.actions, again.actions)


def test_training_is_seeded() -> None:
    config = PpoConfig(**{**SHORT.__dict__, "updates": 2, "n_steps": 256})
    runs = [train([TaskMDP(s) for s in STRUCTURES[:1]], config, progress=False)
            for _ in range(2)]
    assert runs[0].history == runs[1].history
    first, second = (r.model.state_dict() for r in runs)
    assert all(torch.equal(first[k], second[k]) for k in first)


def test_bad_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="precision"):
        _autocast(torch.device("cpu"), "fp8")


def test_environment_rewards_follow_the_phase() -> None:
    tables = [StructureTables(TaskMDP(STRUCTURES[1]))]
    env = VecEnv(tables, n_envs=4, seed=1, max_turns=10)
    obs = env.observe()
    assert obs.mask[:, :3].all() and not obs.mask[:, 3:].any()
    reward, _, _ = env.step(np.zeros(4, dtype=np.int64))  # call the reader
    progressed = env.code % 4 == 1
    assert np.allclose(reward, np.where(progressed, 1 / 3, 0.0))
    env.phase = "sequence"
    reward, _, success = env.step(np.ones(4, dtype=np.int64))
    assert np.array_equal(reward, success.astype(np.float32))
