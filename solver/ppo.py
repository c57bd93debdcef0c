"""PPO with a Transformer actor-critic on the task MDPs, as the paper trains it
(docs/BENCHMARK.md: Solver).

- Actor-critic: a small Transformer encoder over [global token, one token per closure tool];
  the actor scores each tool token (masked to the task's closure), the critic reads the global
  token. Tool tokens carry the tool's identity and its state features (`solver.vecenv`).
- Two-phase reward: coverage-focused (+1/n per required tool covered in order, +1 on full
  success) until the training success rate passes `phase_threshold`, then sequence-focused
  (full success alone: the true objective).
- A 5-stage curriculum over task difficulty (the size of the task's tool closure): stage s
  trains on the easiest s/5 of the structures, and moves on when its success rate passes
  `stage_threshold` or its share of the updates is spent.
- Mixed precision: bf16 autocast on CPU; bf16 on CUDA where supported, else fp16 with a
  gradient scaler. Seeded (torch and the environment's numpy generator), checkpoints, tqdm.

torch is imported here only; the rest of the solver runs without it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from pytest_resilibench.base.rng import key_int
from pytest_resilibench.core.optimum.dp import FINISH, Policy, evaluate
from pytest_resilibench.core.optimum.mdp import TaskMDP

from .vecenv import (
    GLOBAL_FEATURES,
    MAX_TOOLS,
    TOOL_FEATURES,
    Observation,
    StructureTables,
    VecEnv,
)

__all__ = ["ActorCritic", "PpoConfig", "TrainResult", "greedy_policy", "train"]

STAGES = 5


@dataclass(frozen=True)
class PpoConfig:
    """Defaults are the precursor's, except where noted (tuned here, see the report)."""

    lr: float = 1e-3  # precursor 1e-4: too slow for a 10-minute budget on 2 CPU cores
    gamma: float = 1.0  # precursor 0.99: the objective is undiscounted success in the budget
    gae_lambda: float = 0.95
    clip: float = 0.2
    entropy: float = 0.01
    value_coef: float = 0.5
    n_steps: int = 2048  # environment steps per update (n_envs x steps per env)
    n_envs: int = 64
    epochs: int = 4  # precursor 10 x 128: 4 x 256 is 5x cheaper per update on 2 CPU cores
    batch_size: int = 256
    layers: int = 3
    heads: int = 4
    d_model: int = 64
    tool_identity: bool = False  # embed which tool a token is (else its features alone)
    updates: int = 60
    phase_threshold: float = 0.6
    stage_threshold: float = 0.85
    max_grad_norm: float = 0.5
    seed: int = 0
    precision: str = "auto"  # auto | fp32 | bf16 | fp16
    threads: int | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int = 20


class ActorCritic(nn.Module):
    def __init__(self, n_tools: int, config: PpoConfig) -> None:
        super().__init__()
        d = config.d_model
        self.tool_identity = config.tool_identity
        self.tool_embed = nn.Embedding(n_tools + 1, d)  # index 0: padding
        self.tool_proj = nn.Linear(TOOL_FEATURES, d)
        self.global_proj = nn.Linear(GLOBAL_FEATURES, d)
        layer = nn.TransformerEncoderLayer(d, config.heads, dim_feedforward=2 * d, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, config.layers, enable_nested_tensor=False)
        self.actor = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 1))
        self.critic = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, 1))

    def forward(self, ids: torch.Tensor, feats: torch.Tensor, glob: torch.Tensor,
                mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tools = self.tool_proj(feats)
        if self.tool_identity:
            tools = tools + self.tool_embed(ids + 1)
        x = torch.cat([self.global_proj(glob).unsqueeze(1), tools], dim=1)
        ignore = torch.cat([torch.zeros_like(mask[:, :1]), ~mask], dim=1)
        h = self.encoder(x, src_key_padding_mask=ignore)
        logits = self.actor(h[:, 1:]).squeeze(-1).float().masked_fill(~mask, -1e9)
        return logits, self.critic(h[:, 0]).squeeze(-1).float()


def _autocast(device: torch.device, precision: str) -> tuple[Any, bool]:
    """The autocast context for the forward passes, and whether fp16 needs a grad scaler."""
    if precision == "auto":
        if device.type == "cuda":
            precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        else:
            precision = "bf16"
    if precision == "fp32":
        return torch.autocast(device.type, enabled=False), False
    if precision not in ("bf16", "fp16"):
        raise ValueError(f"precision must be auto, fp32, bf16 or fp16, got {precision!r}")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype), precision == "fp16"


def _tensors(obs: Observation, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (torch.as_tensor(obs.tool_ids, device=device),
            torch.as_tensor(obs.tool_feats, device=device),
            torch.as_tensor(obs.global_feats, device=device),
            torch.as_tensor(obs.mask, device=device))


def curriculum(structures: Sequence[StructureTables]) -> list[list[int]]:
    """Five cumulative pools, easiest first (closure size, then number of steps)."""
    order = sorted(range(len(structures)),
                   key=lambda i: (len(structures[i].mdp.actions), structures[i].mdp.n, i))
    return [order[: max(1, math.ceil(len(order) * (s + 1) / STAGES))] for s in range(STAGES)]


@dataclass
class TrainResult:
    model: ActorCritic
    config: PpoConfig
    seconds: float
    env_steps: int
    history: list[dict[str, float]] = field(default_factory=list)


def train(structures: Sequence[TaskMDP], config: PpoConfig = PpoConfig(), *,
          progress: bool = True, device: str | None = None,
          log: Callable[[str], None] | None = None) -> TrainResult:
    """Train on the given task structures (MDPs sharing one turn budget). With `log`, the
    first update's time and the whole run's estimate from it are reported."""
    from tqdm.auto import tqdm

    if config.threads:
        torch.set_num_threads(config.threads)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(config.seed)
    tables = [StructureTables(m) for m in structures]
    max_turns = structures[0].max_turns
    steps_per_env = max(1, config.n_steps // config.n_envs)
    env = VecEnv(tables, n_envs=config.n_envs, seed=key_int("ppo-env", config.seed),
                 max_turns=max_turns)
    pools = curriculum(tables)
    n_tools = len(structures[0].registry)
    model = ActorCritic(n_tools, config).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, eps=1e-5)
    autocast, needs_scaler = _autocast(dev, config.precision)
    scaler = torch.amp.GradScaler(dev.type, enabled=needs_scaler)
    stage, stage_updates = 0, 0
    stage_budget = max(1, config.updates // (2 * STAGES))
    env.set_pool(pools[stage])
    start = time.perf_counter()
    result = TrainResult(model, config, 0.0, 0)
    bar = tqdm(range(config.updates), desc="ppo", unit="update", disable=not progress)
    for update in bar:
        batch, wins, episodes = _rollout(model, env, steps_per_env, dev, autocast, config)
        _optimise(model, optimizer, scaler, batch, dev, autocast, config)
        rate = wins / max(1, episodes)
        record = {"update": update, "success": rate, "stage": stage + 1,
                  "sequence_phase": float(env.phase == "sequence")}
        stage_updates += 1
        if env.phase == "coverage" and rate >= config.phase_threshold:
            env.phase = "sequence"
        if stage < STAGES - 1 and (rate >= config.stage_threshold
                                   or stage_updates >= stage_budget):
            stage, stage_updates = stage + 1, 0
            env.set_pool(pools[stage])
        result.env_steps += steps_per_env * config.n_envs
        result.history.append(record)
        bar.set_postfix(success=f"{rate:.2f}", stage=stage + 1, phase=env.phase)
        if update == 0 and log is not None:
            first = time.perf_counter() - start
            line = (f"PPO: first update in {first:.0f}s; about "
                    f"{first * config.updates / 60:.0f} min for {config.updates} updates on "
                    f"{dev.type}")
            (bar.write if progress else log)(line)  # bar.write keeps the bar on its line
        if config.checkpoint_dir and (update + 1) % config.checkpoint_every == 0:
            save_checkpoint(Path(config.checkpoint_dir) / "ppo.pt", model, optimizer, config,
                            update + 1)
    result.seconds = time.perf_counter() - start
    if config.checkpoint_dir:
        save_checkpoint(Path(config.checkpoint_dir) / "ppo.pt", model, optimizer, config,
                        config.updates)
    return result


def _rollout(model: ActorCritic, env: VecEnv, steps: int, dev: torch.device, autocast: Any,
             config: PpoConfig) -> tuple[dict[str, torch.Tensor], int, int]:
    obs_list: list[Observation] = []
    acts, logps, vals, rews, dones = [], [], [], [], []
    wins = episodes = 0
    model.eval()
    with torch.no_grad():
        for _ in range(steps):
            obs = env.observe()
            with autocast:
                logits, value = model(*_tensors(obs, dev))
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            reward, done, success = env.step(action.cpu().numpy())
            obs_list.append(obs)
            acts.append(action)
            logps.append(dist.log_prob(action))
            vals.append(value)
            rews.append(torch.as_tensor(reward, device=dev))
            dones.append(torch.as_tensor(done, device=dev, dtype=torch.float32))
            wins += int(success.sum())
            episodes += int(done.sum())
        with autocast:
            _, last_value = model(*_tensors(env.observe(), dev))
    values = torch.stack(vals)
    advantages = torch.zeros_like(values)
    gae = torch.zeros_like(last_value)
    next_value = last_value
    for t in reversed(range(steps)):
        live = 1.0 - dones[t]
        delta = rews[t] + config.gamma * next_value * live - values[t]
        gae = delta + config.gamma * config.gae_lambda * live * gae
        advantages[t] = gae
        next_value = values[t]
    batch = {
        "ids": torch.as_tensor(np.concatenate([o.tool_ids for o in obs_list]), device=dev),
        "feats": torch.as_tensor(np.concatenate([o.tool_feats for o in obs_list]), device=dev),
        "glob": torch.as_tensor(np.concatenate([o.global_feats for o in obs_list]), device=dev),
        "mask": torch.as_tensor(np.concatenate([o.mask for o in obs_list]), device=dev),
        "actions": torch.cat(acts),
        "logp": torch.cat(logps),
        "advantages": advantages.reshape(-1),
        "returns": (advantages + values).reshape(-1),
    }
    return batch, wins, episodes


def _optimise(model: ActorCritic, optimizer: torch.optim.Optimizer,
              scaler: torch.amp.GradScaler, batch: dict[str, torch.Tensor], dev: torch.device,
              autocast: Any, config: PpoConfig) -> None:
    model.train()
    size = batch["actions"].shape[0]
    generator = torch.Generator().manual_seed(key_int("ppo-batches", config.seed) % 2**63)
    for _ in range(config.epochs):
        order = torch.randperm(size, generator=generator).to(dev)
        for lo in range(0, size, config.batch_size):
            idx = order[lo : lo + config.batch_size]
            with autocast:
                logits, value = model(batch["ids"][idx], batch["feats"][idx],
                                      batch["glob"][idx], batch["mask"][idx])
            dist = torch.distributions.Categorical(logits=logits)
            logp = dist.log_prob(batch["actions"][idx])
            adv = batch["advantages"][idx]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            ratio = torch.exp(logp - batch["logp"][idx])
            policy_loss = -torch.min(
                ratio * adv, ratio.clamp(1 - config.clip, 1 + config.clip) * adv).mean()
            value_loss = (value - batch["returns"][idx]).pow(2).mean()
            loss = (policy_loss + config.value_coef * value_loss
                    - config.entropy * dist.entropy().mean())
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()


def greedy_policy(model: ActorCritic, mdp: TaskMDP, *, device: str | None = None) -> Policy:
    """The model's greedy policy, valued exactly by the DP. The model is asked only about the
    states the policy itself can reach (level by level from the start); other states keep
    FINISH, which cannot change the value of the start."""
    dev = next(model.parameters()).device if device is None else torch.device(device)
    tables = StructureTables(mdp)
    choose = np.full((mdp.max_turns + 1, mdp.n_states), FINISH, dtype=np.int64)
    live = np.array([mdp.initial_state().code])
    model.eval()
    with torch.no_grad():
        for turns in range(mdp.max_turns, 0, -1):
            live = live[(live != mdp.dead) & (live % (mdp.n + 1) != mdp.n)]
            if not len(live):
                break
            obs = tables.observation(live, np.full(len(live), turns))
            logits, _ = model(*_tensors(obs, dev))
            picks = logits.argmax(dim=1).cpu().numpy()
            choose[turns, live] = picks
            live = np.unique(np.concatenate([tables.succ[picks, live], tables.fail[picks, live]]))
    return evaluate(mdp, choose)


def save_checkpoint(path: Path, model: ActorCritic, optimizer: torch.optim.Optimizer,
                    config: PpoConfig, updates: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "config": asdict(config), "updates": updates, "max_tools": MAX_TOOLS}, path)


def load_model(path: Path, n_tools: int) -> ActorCritic:
    """A trained actor-critic from a checkpoint written by `train`."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    model = ActorCritic(n_tools, PpoConfig(**state["config"]))
    model.load_state_dict(state["model"])
    return model
