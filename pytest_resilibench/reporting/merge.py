"""Shard reports (`--resili-shard=K/N`, integration/shards.py) joined into the whole run's report:
`resilibench report merge A.json B.json ... -o run.json`.

The shards must be one run's: the same config but for `shard` (the models, options, seed,
fixture hash, task set, package version), every shard of the N exactly once, no episode
twice. The joined report's episodes are the shards' in id order, its summary is made from them
as the run's own is (summarize.py), so they equal an unsharded run's; its gate lines are the
caller's (cli.py recomputes them with the run's gate policy, as the run does). The
resili_faults tests' `chaos` sections are joined too (each run once: every shard's job ran
them). Every refusal is one ValueError naming the file or the shard at fault.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_resilibench.reporting.chaos_summary import merge_sections

__all__ = ["ShardReport", "check_shards", "merged_head", "shard_of"]

# Keys of `config` that may differ between the shards of one run.
_PER_SHARD = ("shard",)
# `summary` keys made from how the run went (clocks), merged apart.
_DERIVED_PROVIDER_KEYS = ("requests_per_s", "concurrency")

ShardReport = tuple[Path, dict[str, Any]]


def shard_of(path: Path, report: Mapping[str, Any]) -> tuple[int, int]:
    """(K, N) of a shard report; a ValueError for a report that is no shard."""
    spec = report.get("config", {}).get("shard")
    k, sep, n = str(spec).partition("/")
    if spec is None or not sep or not k.isdigit() or not n.isdigit():
        raise ValueError(f"{path}: not a shard's report (its config has no shard K/N: run "
                         "each part with --resili-shard=K/N)")
    return int(k), int(n)


def _run_config(report: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report["config"].items() if k not in _PER_SHARD}


def check_shards(reports: Sequence[ShardReport]) -> None:
    """Refuse shards that are not exactly the N parts of one run, naming what is wrong."""
    if not reports:
        raise ValueError("give the shards' reports to merge")
    first_path, first = reports[0]
    _, count = shard_of(first_path, first)
    reference = _run_config(first)
    seen: dict[int, Path] = {}
    ids: dict[str, Path] = {}
    for path, report in reports:
        index, n = shard_of(path, report)
        if n != count:
            raise ValueError(f"{path}: shard {index}/{n} is of another split than {first_path} "
                             f"(shard of {count}): not the same run")
        config = _run_config(report)
        if config != reference:
            differ = sorted(k for k in {*config, *reference} if config.get(k) != reference.get(k))
            raise ValueError(f"{path}: not the same run as {first_path}: its config differs in "
                             f"{', '.join(differ)}")
        if index in seen:
            raise ValueError(f"{path} and {seen[index]} are both shard {index}/{count}")
        seen[index] = path
        for episode in report["episodes"]:
            if (other := ids.setdefault(episode["id"], path)) != path:
                raise ValueError(f"{path} and {other} both hold episode {episode['id']}: the "
                                 "shards overlap")
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise ValueError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"missing: a merged report holds every shard of the run")


def merged_providers(reports: Sequence[ShardReport]) -> dict[str, Any]:
    """The real models' provider counters of all shards, as one run's (`probe.merge_stats`)."""
    from pytest_resilibench.runtime.agents.probe import merge_stats, throughput

    total: dict[str, dict[str, Any]] = {}
    for _, report in reports:
        for model, stats in (report["summary"].get("providers") or {}).items():
            raw = {k: v for k, v in stats.items() if k not in _DERIVED_PROVIDER_KEYS}
            total[model] = merge_stats(total.get(model), raw)
    return {model: throughput(stats) for model, stats in sorted(total.items())}


def merged_head(reports: Sequence[ShardReport], summary: Mapping[str, Any], *,
                rootdir: Path) -> dict[str, Any]:
    """Everything of the merged report but its episodes and gate lines (`environment.gate`,
    the caller's): the run's config, the shards' counts added up, each shard named."""
    from pytest_resilibench.reporting.report import envelope

    first = reports[0][1]
    environments = [report["environment"] for _, report in reports]
    starts = sorted(str(env["started"]) for env in environments if env.get("started"))
    lost = [line for env in environments for line in env.get("lost") or ()]
    shards = [{"file": str(path), "shard": report["config"]["shard"],
               "created": report["environment"].get("created"),
               "commit": report["environment"].get("commit"),
               "machine": report["environment"].get("machine"),
               "episodes": len(report["episodes"])}
              for path, report in sorted(reports, key=lambda r: shard_of(*r))]
    head = envelope(config=_run_config(first), summary=summary, rootdir=rootdir,
                    extra={"lost": lost, "started": starts[0] if starts else None,
                           "shards": shards})
    head["complete"] = all(bool(report.get("complete", True)) for _, report in reports)
    for key in ("expected", "received", "resumed"):
        head[key] = sum(int(report.get(key) or 0) for _, report in reports)
    if "prompt_cache" in first:  # the whole run's prefix, the same in every shard
        head["prompt_cache"] = first["prompt_cache"]
    # The resili_faults tests ran in every shard's job (they are not sharded): once each.
    chaos = merge_sections(reports)
    if chaos is not None:
        head["chaos"] = chaos
    return head
