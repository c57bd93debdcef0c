"""PPO on the realistic fault profile's MDPs (docs/FAULTS.md), checked against the exact DP.

The paper profile's PPO (`solver.ppo`) steps packed states through dense tables; the realistic
MDP (`core/optimum/realistic.py`) is explored state by state, so this trainer steps it the same way:
each environment samples an outcome from `RealisticMDP.branches`. The policy scores each legal
action with one shared MLP over [global features, the action's features] (a softmax over the
legal actions, whose number varies); the critic reads the global features. Reward: 1 on full
success (a sound deliverable), else 0; gamma 1, GAE, clipped PPO updates. Structures are split
as in `solver.solve` (a seeded fifth held out); the greedy policy is then valued exactly
(`RealisticMDP.evaluate`) on the held-out structures and compared with the DP value.

Run `python -m solver.realistic_ppo [updates]`: it writes the `ppo` entry of the report's
`realistic` section. torch is imported here only.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from pytest_resilibench.base.rng import uniform
from pytest_resilibench.core.faults import AUTHENTICATOR
from pytest_resilibench.core.optimum.realistic import (
    DOWN,
    EXPIRED,
    GOOD,
    UP,
    RealisticMDP,
    RState,
    realistic_mdp,
)
from pytest_resilibench.core.tasks import load_tasks, task_set_dir

# The realistic figures and stored plans are the paper set's (docs/FAULTS.md).
PAPER = task_set_dir("paper")

__all__ = ["RealisticPpoConfig", "features", "greedy_chooser", "train"]

GLOBAL, ACTION = 13, 12


@dataclass(frozen=True)
class RealisticPpoConfig:
    lr: float = 3e-3
    clip: float = 0.2
    entropy: float = 0.01
    value_coef: float = 0.5
    gae_lambda: float = 0.95
    n_envs: int = 32
    steps_per_env: int = 16  # an update sees n_envs x steps_per_env transitions
    epochs: int = 4
    batch_size: int = 128
    hidden: int = 64
    updates: int = 150
    seed: int = 0
    held_out_share: float = 0.2


def features(mdp: RealisticMDP, state: RState) -> tuple[np.ndarray, list[int], np.ndarray]:
    """(global features, legal actions, their features) of a state."""
    n, budget = mdp.n, mdp.max_turns
    k = min(state.k, n)
    calls = budget - state.turns_left
    glob = np.array([
        k / n, (n - k) / budget, state.turns_left / budget,
        (state.turns_left - (n - k)) / budget,
        state.window & 1, (state.window >> 1) & 1, (state.window >> 2) & 1, calls >= 3,
        state.auth == GOOD, state.auth == EXPIRED, state.blocked >= 0, state.empty > 0,
        state.k == n,
    ], dtype=np.float32)
    actions = mdp.actions(state)
    feats = np.zeros((len(actions), ACTION), dtype=np.float32)
    current = min(state.k, n - 1)
    for row, a in enumerate(actions):
        tool = mdp.tools[a]
        status = state.status[tool.step] if tool.step >= 0 else 0
        fail_bit = mdp._fail_bit(tool)
        feats[row] = (
            tool.step == current and not tool.alt, tool.step == current and tool.alt,
            tool.prereq >= 0, tool.prereq >= 0 and (state.ok >> tool.prereq) & 1,
            tool.name == AUTHENTICATOR, tool.step < 0 and tool.prereq < 0
            and tool.name != AUTHENTICATOR, tool.step >= 0 and tool.step != current,
            mdp._probability(tool, state), status == UP, status == DOWN,
            state.blocked == a, bool(state.failed & fail_bit),
        )
    return glob, actions, feats


class _Net(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(GLOBAL + ACTION, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.critic = nn.Sequential(nn.Linear(GLOBAL, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))

    def logits(self, glob: torch.Tensor, feats: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([glob.expand(feats.shape[0], -1), feats], dim=1)
        return self.actor(joined).squeeze(-1)

    def batch_logits(self, glob: torch.Tensor, feats: torch.Tensor,
                     mask: torch.Tensor) -> torch.Tensor:
        """Logits of padded batches: glob [B, G], feats [B, A, F], mask [B, A]."""
        joined = torch.cat([glob[:, None, :].expand(-1, feats.shape[1], -1), feats], dim=2)
        return self.actor(joined).squeeze(-1).masked_fill(~mask, float("-inf"))


def _pad(rows: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, ...]:
    """Stack (global, action features) rows, padding the actions: (glob, feats, mask)."""
    width = max(len(f) for _, f in rows)
    glob = torch.from_numpy(np.stack([g for g, _ in rows]))
    feats = np.zeros((len(rows), width, ACTION), dtype=np.float32)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, (_, f) in enumerate(rows):
        feats[i, : len(f)] = f
        mask[i, : len(f)] = True
    return glob, torch.from_numpy(feats), torch.from_numpy(mask)


@dataclass
class _Step:
    glob: np.ndarray
    feats: np.ndarray
    action: int  # row among the legal actions
    logp: float
    value: float
    reward: float
    done: bool


def train(mdps: Sequence[RealisticMDP], config: RealisticPpoConfig = RealisticPpoConfig(),
          ) -> tuple[_Net, list[dict[str, float]]]:
    """Train on the given MDPs (each episode plays one, drawn at random); returns the model
    and the per-update history (training success rate)."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    net = _Net(config.hidden)
    optimizer = torch.optim.Adam(net.parameters(), lr=config.lr)
    envs = [_reset(mdps, rng) for _ in range(config.n_envs)]
    history = []
    for update in range(config.updates):
        trajectories: list[list[_Step]] = [[] for _ in envs]
        wins = finished = 0
        for _ in range(config.steps_per_env):
            seen = [features(mdp, state) for mdp, state in envs]
            with torch.no_grad():  # one forward pass for every environment
                g, f, m = _pad([(glob, feats) for glob, _, feats in seen])
                all_probs = torch.softmax(net.batch_logits(g, f, m), 1).numpy()
                values = net.critic(g).squeeze(-1).numpy()
            for i, (mdp, state) in enumerate(envs):
                glob, actions, feats = seen[i]
                probs = all_probs[i, : len(actions)].astype(np.float64)
                value = float(values[i])
                row = int(rng.choice(len(actions), p=probs / probs.sum()))
                branches = mdp.branches(state, actions[row])
                weights = np.array([b[0] for b in branches])
                nxt = branches[int(rng.choice(len(branches), p=weights / weights.sum()))][1]
                won = mdp.is_success(nxt)
                done = won or nxt.turns_left <= 0 or not mdp.actions(nxt)
                trajectories[i].append(_Step(glob, feats, row, float(np.log(probs[row])),
                                             value, float(won), done))
                if done:
                    wins += won
                    finished += 1
                    envs[i] = _reset(mdps, rng)
                else:
                    envs[i] = (mdp, nxt)
        _optimise(net, optimizer, trajectories, envs, config, rng)
        history.append({"update": update, "success": wins / finished if finished else 0.0})
    return net, history


def _reset(mdps: Sequence[RealisticMDP], rng: np.random.Generator) -> tuple[RealisticMDP, RState]:
    mdp = mdps[int(rng.integers(len(mdps)))]
    return mdp, mdp.initial_state()


def _optimise(net: _Net, optimizer: torch.optim.Optimizer, trajectories: list[list[_Step]],
              envs: list[tuple[RealisticMDP, RState]], config: RealisticPpoConfig,
              rng: np.random.Generator) -> None:
    steps: list[_Step] = []
    advantages: list[float] = []
    returns: list[float] = []
    for traj, (mdp, state) in zip(trajectories, envs, strict=True):
        with torch.no_grad():  # bootstrap an unfinished episode from the critic
            last = float(net.critic(torch.from_numpy(features(mdp, state)[0])))
        gae, adv = 0.0, [0.0] * len(traj)
        for t in reversed(range(len(traj))):
            step = traj[t]
            nxt = 0.0 if step.done else (traj[t + 1].value if t + 1 < len(traj) else last)
            delta = step.reward + nxt - step.value
            gae = delta + (0.0 if step.done else config.gae_lambda * gae)
            adv[t] = gae
        steps += traj
        advantages += adv
        returns += [a + s.value for a, s in zip(adv, traj, strict=True)]
    adv_t = torch.tensor(advantages, dtype=torch.float32)
    adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-8)
    ret_t = torch.tensor(returns, dtype=torch.float32)
    glob, feats, mask = _pad([(s.glob, s.feats) for s in steps])
    chosen = torch.tensor([s.action for s in steps])
    old_logp = torch.tensor([s.logp for s in steps], dtype=torch.float32)
    for _ in range(config.epochs):
        order = torch.from_numpy(rng.permutation(len(steps)))
        for start in range(0, len(order), config.batch_size):
            b = order[start:start + config.batch_size]
            logp_all = torch.log_softmax(net.batch_logits(glob[b], feats[b], mask[b]), 1)
            ratio = torch.exp(logp_all.gather(1, chosen[b, None]).squeeze(1) - old_logp[b])
            a = adv_t[b]
            policy = -torch.min(ratio * a, ratio.clamp(1 - config.clip, 1 + config.clip) * a)
            value = (net.critic(glob[b]).squeeze(-1) - ret_t[b]) ** 2
            p = logp_all.exp()
            entropy = -(p * logp_all.masked_fill(~mask[b], 0.0)).sum(1)
            loss = (policy + config.value_coef * value - config.entropy * entropy).mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            optimizer.step()


def greedy_chooser(net: _Net, mdp: RealisticMDP) -> Any:
    """The trained policy's greedy choice per state (memoised), for `RealisticMDP.evaluate`."""
    memo: dict[RState, str | None] = {}

    def choose(state: RState) -> str | None:
        if state not in memo:
            glob, actions, feats = features(mdp, state)
            if not actions:
                memo[state] = None
            else:
                with torch.no_grad():
                    logits = net.logits(torch.from_numpy(glob), torch.from_numpy(feats))
                memo[state] = mdp.tools[actions[int(logits.argmax())]].name
        return memo[state]

    return choose


def main(updates: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    config = RealisticPpoConfig(updates=updates)
    tasks = load_tasks(PAPER).tasks
    mdps: dict[tuple[str, ...], RealisticMDP] = {}
    counts: dict[tuple[str, ...], int] = {}
    for task in tasks:
        mdps.setdefault(task.required_tools, realistic_mdp(task))
        counts[task.required_tools] = counts.get(task.required_tools, 0) + 1
    held_out = sorted(s for s in mdps if uniform("solver-held-out", config.seed, *s)
                      < config.held_out_share)
    training = [mdps[s] for s in sorted(mdps) if s not in held_out]
    start = time.perf_counter()
    net, history = train(training, config)
    seconds = time.perf_counter() - start
    ratios, weights = [], []
    for s in held_out:
        mdp = mdps[s]
        dp = mdp.value(mdp.initial_state())
        ppo = mdp.evaluate(greedy_chooser(net, mdp))
        ratios.append(ppo / dp if dp > 0 else 1.0)
        weights.append(counts[s])
    found = {
        "config": asdict(config), "train_seconds": seconds,
        "env_steps": config.updates * config.n_envs * config.steps_per_env,
        "training_structures": len(training), "held_out_structures": len(held_out),
        "held_out_tasks": int(sum(weights)),
        "held_out_ratio_mean": float(np.average(ratios, weights=weights)),
        "held_out_ratio_min": float(min(ratios)),
        "final_training_success": history[-1]["success"],
        "history": history[:: max(1, len(history) // 20)],
    }
    return found


if __name__ == "__main__":
    from .solve import write_solver_report

    result = main(int(sys.argv[1]) if len(sys.argv) > 1 else RealisticPpoConfig.updates)
    print(json.dumps({k: v for k, v in result.items() if k != "history"}, indent=1))
    path = PAPER / "solver_report.json"
    report = json.loads(path.read_text())
    report.setdefault("realistic", {})["ppo"] = result
    write_solver_report(path, report)
