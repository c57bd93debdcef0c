"""`resilibench solve`: every task's optimal workflow and bounds, written to `fixtures/`.

- exact DP per task (bound iii), the naive plan's value ("required tools in order, retry on
  failure") and whether the optimal plan differs from it, at the configured base rate, plus a
  sweep over the paper's base rates;
- optionally PPO: trained on the task structures (distinct required-tool lists) outside a
  held-out fifth, its greedy policy valued exactly on every task; the report's
  `ppo_to_dp_ratio` is the mean over held-out tasks;
- a sample of the clairvoyant bound (ii) beside the DP value.

Outputs: `workflows.jsonl.gz` (one line per task, sorted keys, gzip mtime 0: byte-identical
for identical results) and `solver_report.json`.
"""

from __future__ import annotations

import gzip
import io
import json
import resource
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_resilibench.base.atomic import atomic_write
from pytest_resilibench.base.rng import uniform
from pytest_resilibench.core.fixture_files import write_fixture_file
from pytest_resilibench.core.optimum.dp import naive_policy, optimal_policy, solve_task, workflow_of
from pytest_resilibench.core.optimum.mdp import DEFAULT_MAX_TURNS, TaskMDP
from pytest_resilibench.core.simulator import DEFAULT_BASE_SUCCESS, EpisodeKey
from pytest_resilibench.core.tasks import Task

from .clairvoyant import clairvoyant

__all__ = ["REPORT_SCHEMA", "solve_all", "write_jsonl_gz"]

REPORT_SCHEMA = "resilibench.solver_report/1"
WORKFLOWS_SCHEMA = "resilibench.workflows/1"
SWEEP = (0.9, 0.8, 0.7, 0.6)
HELD_OUT_SHARE = 0.2


def write_jsonl_gz(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Deterministic gzip'd JSON lines (sorted keys, no timestamp in the header), written
    atomically with its sha256 recorded in the manifest beside it (`fixture_files.py`)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as fh:
        for row in rows:
            fh.write((json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n").encode())
    write_fixture_file(path.parent, path.name, buffer.getvalue())


def write_solver_report(path: Path, report: dict[str, Any]) -> None:
    """`solver_report.json`, whole and atomically (every solver step that updates it)."""
    atomic_write(path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode())


def _progress(items: Sequence[Any], desc: str, on: bool) -> Iterable[Any]:
    """A tqdm bar (rate and time left) over `items` when asked and tqdm is installed (the
    `solver` extra); the items alone otherwise."""
    if not on:
        return items
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, unit="task", leave=False)


def _differs(tools: Sequence[str], required: Sequence[str]) -> bool:
    return tuple(tools) != tuple(required)


def _sweep(tasks: Sequence[Task], max_turns: int, progress: bool = False
           ) -> dict[str, dict[str, float]]:
    out = {}
    for base in SWEEP:
        gains, differs, values = [], [], []
        for task in _progress(tasks, f"sweep at base {base}", progress):
            policy = optimal_policy(task.required_tools, base_success=base, max_turns=max_turns)
            naive = naive_policy(policy.mdp).value
            gains.append(policy.value - naive)
            differs.append(gains[-1] > 1e-9)
            values.append(policy.value)
        out[str(base)] = {"dp_mean": float(np.mean(values)),
                          "share_optimal_beats_naive": float(np.mean(differs)),
                          "mean_gain_over_naive": float(np.mean(gains))}
    return out


def _clairvoyant_sample(tasks: Sequence[Task], base: float, max_turns: int,
                        every: int = 25, seeds: int = 3) -> dict[str, float]:
    clair, dp = [], []
    start = time.perf_counter()
    for task in tasks[::every]:
        mdp = solve_task(task, base_success=base, max_turns=max_turns).mdp
        for seed in range(seeds):
            found = clairvoyant(task.required_tools, EpisodeKey(seed, task.id, 0), mdp=mdp)
            clair.append(found.success)
        dp.append(solve_task(task, base_success=base, max_turns=max_turns).value)
    return {"tasks": len(dp), "seeds_per_task": seeds, "clairvoyant_mean": float(np.mean(clair)),
            "dp_mean_same_tasks": float(np.mean(dp)),
            "seconds_per_episode": (time.perf_counter() - start) / max(1, len(clair))}


def solve_all(
    tasks: Sequence[Task],
    out_dir: Path,
    *,
    base_success: float = DEFAULT_BASE_SUCCESS,
    max_turns: int = DEFAULT_MAX_TURNS,
    ppo: Any = None,  # a solver.ppo.PpoConfig, or None for the exact solve alone
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Solve every task, write the fixtures into `out_dir`, return the report."""
    if not tasks:
        raise ValueError("no tasks to solve")
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rows: dict[str, dict[str, Any]] = {}
    for task in _progress(tasks, "exact DP", progress):
        solution = solve_task(task, base_success=base_success, max_turns=max_turns)
        workflow = solution.workflow
        rows[task.id] = {
            "schema": WORKFLOWS_SCHEMA,
            "task_id": task.id,
            "optimal": workflow.to_json(),
            "bounds": {"dp": solution.value, "naive": solution.naive_value},
            "differs_from_naive": _differs(workflow.tools, task.required_tools),
        }
    exact_seconds = time.perf_counter() - start
    structures = sorted({t.required_tools for t in tasks})
    log(f"exact DP: {len(tasks)} tasks ({len(structures)} structures) in {exact_seconds:.1f}s")
    dp = np.array([r["bounds"]["dp"] for r in rows.values()])
    naive = np.array([r["bounds"]["naive"] for r in rows.values()])
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "config": {"base_success": base_success, "max_turns": max_turns, "tasks": len(tasks),
                   "structures": len(structures)},
        "dp_mean": float(dp.mean()),
        "naive_mean": float(naive.mean()),
        "share_optimal_differs_from_naive": float(np.mean(
            [r["differs_from_naive"] for r in rows.values()])),
        "share_optimal_beats_naive": float(np.mean(dp - naive > 1e-9)),
        "mean_gain_over_naive": float((dp - naive).mean()),
        "mean_gain_where_differs": float((dp - naive)[dp - naive > 1e-9].mean())
        if (dp - naive > 1e-9).any() else 0.0,
        "base_success_sweep": _sweep(tasks, max_turns, progress),
        "outside_closure_gain": 0.0,  # checked in tests/solver/test_dp.py against brute force
        "timings": {"exact_all_tasks_s": exact_seconds,
                    "exact_per_task_ms": 1000 * exact_seconds / len(tasks)},
        "ppo": None,
        "ppo_to_dp_ratio": None,
    }
    report["clairvoyant_sample"] = _clairvoyant_sample(list(tasks), base_success, max_turns)
    if ppo is not None:
        report["ppo"] = _train_and_compare(tasks, rows, structures, ppo, base_success,
                                           max_turns, progress, log)
        report["ppo_to_dp_ratio"] = report["ppo"]["held_out_ratio_mean"]
        report["timings"]["ppo_train_s"] = report["ppo"]["train_seconds"]
    report["peak_memory_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    write_jsonl_gz(out_dir / "workflows.jsonl.gz", [rows[k] for k in sorted(rows)])
    write_solver_report(out_dir / "solver_report.json", report)
    return report


def _train_and_compare(
    tasks: Sequence[Task], rows: dict[str, dict[str, Any]], structures: list[tuple[str, ...]],
    config: Any, base: float, max_turns: int, progress: bool, log: Callable[[str], None],
) -> dict[str, Any]:
    from dataclasses import asdict

    from .ppo import greedy_policy, train

    held_out = {s for s in structures if uniform("solver-held-out", config.seed, *s)
                < HELD_OUT_SHARE}
    training = [TaskMDP(s, base_success=base, max_turns=max_turns)
                for s in structures if s not in held_out]
    log(f"PPO: {config.updates} updates of {config.n_steps} steps on {len(training)} "
        "structures; the bar shows the time left after the first update")
    result = train(training, config, progress=progress, log=log)
    log(f"PPO: {result.env_steps} steps in {result.seconds:.0f}s")
    policies = {s: greedy_policy(result.model, TaskMDP(s, base_success=base,
                                                      max_turns=max_turns))
                for s in structures}
    ratios: dict[bool, list[float]] = {True: [], False: []}
    for task in tasks:
        row = rows[task.id]
        policy = policies[task.required_tools]
        ratio = policy.value / row["bounds"]["dp"] if row["bounds"]["dp"] > 0 else 1.0
        row["bounds"]["ppo"] = policy.value
        row["ppo"] = {"workflow": workflow_of(policy, task).to_json(), "ratio": ratio,
                      "held_out": task.required_tools in held_out}
        ratios[task.required_tools in held_out].append(ratio)
    return {
        "config": asdict(config),
        "train_seconds": result.seconds,
        "env_steps": result.env_steps,
        "held_out_structures": len(held_out),
        "held_out_tasks": len(ratios[True]),
        "held_out_ratio_mean": float(np.mean(ratios[True])) if ratios[True] else None,
        "held_out_ratio_min": float(np.min(ratios[True])) if ratios[True] else None,
        "train_ratio_mean": float(np.mean(ratios[False])) if ratios[False] else None,
        "final_training_success": result.history[-1]["success"] if result.history else None,
        "history": result.history,
    }
