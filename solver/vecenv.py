"""A batch of task MDPs stepped together in numpy: PPO's training environment.

Each environment plays one task (drawn from the curriculum's current pool) through the MDP's
precomputed transition tables, so a step costs a table lookup, not a simulator call. The
observation is a short token sequence: one global token (progress, turns, slack, the
last-three window) and one token per tool of the task's closure (its role in the task, its
status, the success probability a call would have now: the policy knows the failure model, as
bound (iii) does). Actions are tool slots, masked to the task's closure; the episode finishes
by itself once every required tool succeeded in order (finishing earlier never pays).

Rewards: "coverage" phase, +1/n per required tool newly covered in order plus 1 on full
success; "sequence" phase, the objective alone (1 on full success, else 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pytest_resilibench.core.optimum.mdp import TaskMDP
from pytest_resilibench.core.simulator import RECENT_WINDOW

__all__ = ["GLOBAL_FEATURES", "MAX_TOOLS", "TOOL_FEATURES", "Observation", "StructureTables",
           "VecEnv"]

MAX_TOOLS = 10
TOOL_FEATURES = 10
GLOBAL_FEATURES = 10


@dataclass(frozen=True)
class Observation:
    tool_ids: np.ndarray  # int64[B, MAX_TOOLS], registry index, -1 = padding
    tool_feats: np.ndarray  # float32[B, MAX_TOOLS, TOOL_FEATURES]
    global_feats: np.ndarray  # float32[B, GLOBAL_FEATURES]
    mask: np.ndarray  # bool[B, MAX_TOOLS], the legal actions


class StructureTables:
    """An MDP's transitions and per-state tool features as dense arrays."""

    def __init__(self, mdp: TaskMDP) -> None:
        if len(mdp.actions) > MAX_TOOLS or mdp.with_outside:
            raise ValueError(f"at most {MAX_TOOLS} closure tools, got {len(mdp.actions)}")
        self.mdp = mdp
        trans = mdp.transitions
        self.p = np.stack([np.stack([t.p_early for t in trans]),
                           np.stack([t.p_late for t in trans])])  # [2, A, N]
        dead = np.full((len(trans), 1), mdp.dead)
        self.succ = np.concatenate([np.stack([t.on_success for t in trans]), dead], axis=1)
        self.fail = np.concatenate([np.stack([t.on_failure for t in trans]), dead], axis=1)
        names = mdp.registry.names
        self.ids = np.array([names.index(t) for t in mdp.actions])
        self.next_action = np.array([mdp.action_index[t] for t in mdp.required] + [-1])
        self.feats = self._tool_features()  # [2, N, A, F]

    def _tool_features(self) -> np.ndarray:
        mdp = self.mdp
        k, flags, _ = mdp._codes
        n_states, n_actions = mdp.n_states, len(mdp.actions)
        next_deps = np.zeros((mdp.n + 1, n_actions), dtype=bool)
        for j, name in enumerate(mdp.required):
            for d in mdp.tools[mdp.action_index[name]].deps:
                next_deps[j, d] = True
        out = np.zeros((2, n_states, n_actions, TOOL_FEATURES), dtype=np.float32)
        for a, tool in enumerate(mdp.tools):
            j, steps = tool.required_index, tool.required_indices
            succeeded = mdp._succeeded(tool, k, flags)
            failed = (flags >> tool.fail_bit) & 1 if tool.fail_bit >= 0 else np.zeros_like(k)
            columns = [  # a step asked twice: next at either, done after its last
                np.full(n_states, j >= 0), np.full(n_states, j < 0),
                np.isin(k, steps), (j >= 0) & (k > (steps[-1] if steps else j)),
                (j >= 0) & (k < j),
                succeeded, failed, next_deps[k, a],
                np.full(n_states, (j + 1) / mdp.n if j >= 0 else 0.0),
            ]
            for late in range(2):
                out[late, :, a, : len(columns)] = np.stack(columns, axis=1)
                out[late, :, a, len(columns)] = self.p[late, a]
        return out


    def observation(self, codes: np.ndarray, turns: np.ndarray) -> Observation:
        """Observations of a batch of live states (codes, turns left) of this structure."""
        mdp = self.mdp
        size, n_actions = len(codes), len(self.ids)
        late = (mdp.max_turns - turns >= RECENT_WINDOW).astype(np.int64)
        ids = np.full((size, MAX_TOOLS), -1, dtype=np.int64)
        ids[:, :n_actions] = self.ids
        feats = np.zeros((size, MAX_TOOLS, TOOL_FEATURES), dtype=np.float32)
        feats[:, :n_actions] = self.feats[late, codes]
        mask = np.zeros((size, MAX_TOOLS), dtype=bool)
        mask[:, :n_actions] = True
        k = codes % (mdp.n + 1)
        window = codes // (mdp.n + 1) >> mdp.flag_bits
        budget = mdp.max_turns
        next_tool = self.next_action[k]
        glob = np.stack([
            k / mdp.n, (mdp.n - k) / budget, turns / budget, (turns - (mdp.n - k)) / budget,
            window & 1, (window >> 1) & 1, (window >> 2) & 1, late,
            np.full(size, mdp.n / MAX_TOOLS),
            self.p[late, next_tool.clip(0), codes] * (next_tool >= 0),
        ], axis=1).astype(np.float32)
        return Observation(ids, feats, glob, mask)


class VecEnv:
    """`n_envs` episodes at once over a pool of structures (set by the curriculum)."""

    def __init__(self, tables: Sequence[StructureTables], *, n_envs: int, seed: int,
                 max_turns: int) -> None:
        self.tables = list(tables)
        self.n_envs = n_envs
        self.max_turns = max_turns
        self.rng = np.random.default_rng(seed)
        self.pool = np.arange(len(self.tables))
        self.phase = "coverage"
        self.task = np.zeros(n_envs, dtype=np.int64)
        self.code = np.zeros(n_envs, dtype=np.int64)
        self.turns = np.zeros(n_envs, dtype=np.int64)
        for i in range(n_envs):
            self._reset(i)

    def set_pool(self, pool: Sequence[int]) -> None:
        self.pool = np.asarray(pool)

    def _reset(self, i: int) -> None:
        self.task[i] = self.rng.choice(self.pool)
        start = self.tables[self.task[i]].mdp.initial_state()
        self.code[i], self.turns[i] = start.code, start.turns_left

    def observe(self) -> Observation:
        out = Observation(
            np.full((self.n_envs, MAX_TOOLS), -1, dtype=np.int64),
            np.zeros((self.n_envs, MAX_TOOLS, TOOL_FEATURES), dtype=np.float32),
            np.zeros((self.n_envs, GLOBAL_FEATURES), dtype=np.float32),
            np.zeros((self.n_envs, MAX_TOOLS), dtype=bool),
        )
        for t in np.unique(self.task):  # one vectorised lookup per structure in play
            rows = np.flatnonzero(self.task == t)
            part = self.tables[t].observation(self.code[rows], self.turns[rows])
            out.tool_ids[rows] = part.tool_ids
            out.tool_feats[rows] = part.tool_feats
            out.global_feats[rows] = part.global_feats
            out.mask[rows] = part.mask
        return out

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Apply one action per env; returns (reward, done, full_success) and resets the
        finished envs."""
        reward = np.zeros(self.n_envs, dtype=np.float32)
        done = np.zeros(self.n_envs, dtype=bool)
        success = np.zeros(self.n_envs, dtype=bool)
        draws = self.rng.random(self.n_envs)
        for i in range(self.n_envs):
            tab = self.tables[self.task[i]]
            mdp = tab.mdp
            a, code = int(actions[i]), int(self.code[i])
            late = int(self.max_turns - self.turns[i] >= RECENT_WINDOW)
            ok = draws[i] < tab.p[late, a, code]
            nxt = int((tab.succ if ok else tab.fail)[a, code])
            self.code[i], self.turns[i] = nxt, self.turns[i] - 1
            won = nxt != mdp.dead and nxt % (mdp.n + 1) == mdp.n
            if self.phase == "coverage" and nxt != mdp.dead:
                reward[i] += ((nxt % (mdp.n + 1)) - (code % (mdp.n + 1))) / mdp.n
            reward[i] += won
            if won or nxt == mdp.dead or self.turns[i] <= 0:
                done[i], success[i] = True, won
                self._reset(i)
        return reward, done, success
