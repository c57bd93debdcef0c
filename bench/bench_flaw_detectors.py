"""Learned detectors of flawed plans (issue 50): can a shallow model, trained on other tasks'
genuine and flawed plans, tell a flawed plan from the genuine one without reading for meaning?

For each flaw and severity, every task of the set gives two examples that share the task: its
genuine plan (the optimal variant's) and its flawed plan. Detectors are trained on two thirds
of the tasks and scored on the third they never saw (3 folds by task, seeded), as ROC AUC: 0.5
is chance, 1.0 a perfect detector. Two families, each on two views:

- linear: logistic regression over word 1-3 grams of a tokenised plan (tools, argument keys,
  argument values by shape, purposes, step-to-step transitions);
- trees: gradient-boosted trees (scikit-learn's HistGradientBoosting) over structural features:
  step count, repeats, roles, argument counts, and what genuine training plans teach (tool
  transitions, precedences, (tool, source) pairs and argument-key sets never seen in them).

Views: `plan` (the plan block alone) and `plan+task` (plus string tests against the task's text:
plan values found in the text, Inputs values the plan leaves unused, the text order of the values
against the plan's, the Expected-outputs values in the last step).

Run:  python bench/bench_flaw_detectors.py [--task-set default] [--tasks 1500]
      [--severities light,medium] [--seed 0]
Needs scikit-learn (the `dev` extra).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_resilibench.base.names import FLAWS
from pytest_resilibench.core.prompts import Variant, plan_for
from pytest_resilibench.core.registry import ToolRegistry, default_registry
from pytest_resilibench.core.tasks import TASK_SETS, Task, load_tasks

FAMILIES = ("linear", "trees")
VIEWS = ("plan", "plan+task")


@dataclass(frozen=True)
class Example:
    """One plan of one task: what a detector sees, and whether it is flawed."""

    task_id: str
    text: str  # the task's text before the plan: statement, Inputs, Expected outputs
    inputs: Mapping[str, Any]
    expected: Mapping[str, Any]
    steps: tuple[Mapping[str, Any], ...]  # {"tool", "arguments", "purpose"}
    flawed: bool


def examples(tasks: Sequence[Task], flaw: str, severity: str,
             registry: ToolRegistry) -> list[Example]:
    """The genuine and the flawed plan of every task (tasks whose flaw changed nothing are
    kept: a detector cannot tell them apart, as it should not)."""
    out = []
    for task in tasks:
        genuine, _ = plan_for(task, Variant("optimal"), registry)
        flawed, _ = plan_for(task, Variant("flawed", flaw, severity), registry)
        assert genuine is not None and flawed is not None
        text = task.description
        inputs = dict(task.shown_inputs)
        expected = dict(getattr(task, "expected_outputs", {}) or {})
        for plan, is_flawed in ((genuine, False), (flawed, True)):
            steps = tuple({"tool": s.tool, "arguments": dict(s.arguments),
                           "purpose": s.purpose} for s in plan.steps)
            out.append(Example(task.id, text, inputs, expected, steps, is_flawed))
    return out


# --- the linear family's documents ----------------------------------------------------------
def _shape(value: Any) -> str:
    """A value by its shape: a URL, a path with its extension, a number, a word, an email."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "num"
    text = str(value)
    if "://" in text:
        return "url"
    if "@" in text:
        return "email"
    if "/" in text:
        return "path" + (Path(text).suffix or "")
    return text if re.fullmatch(r"[a-z_]{1,20}", text) else "str"


def plan_tokens(ex: Example) -> list[str]:
    tokens = []
    previous = "START"
    for step in ex.steps:
        tool = str(step["tool"])
        tokens += [tool, f"after_{previous}_{tool}"]
        for key, value in sorted(step["arguments"].items()):
            tokens += [f"{tool}.{key}", f"{key}={_shape(value)}"]
        tokens += re.findall(r"[a-z]+", str(step.get("purpose", "")).lower())
        previous = tool
    tokens.append(f"after_{previous}_END")
    return tokens


def task_tests(ex: Example) -> dict[str, float]:
    """String tests of the plan against the task's text: no meaning, only matching."""
    text = ex.text
    values = [(k, v) for s in ex.steps for k, v in s["arguments"].items()]
    strings = [str(v) for _, v in values]
    shown = {str(v) for v in ex.inputs.values()}
    in_text = [s for s in strings if s and s in text]
    positions = [text.find(s) for s in in_text]
    inversions = sum(1 for i in range(len(positions)) for j in range(i + 1, len(positions))
                     if positions[i] > positions[j] >= 0)
    pairs = max(1, len(positions) * (len(positions) - 1) // 2)
    last = ex.steps[-1]["arguments"] if ex.steps else {}
    expected = {str(v) for v in ex.expected.values()}
    return {
        "values": len(strings),
        "values_in_text": len(in_text),
        "values_not_in_text": len(strings) - len(in_text),
        "values_not_shown": sum(1 for s in strings if s not in shown),
        "shown_unused": sum(1 for v in shown if v not in strings),
        "order_inversions": inversions / pairs,
        "expected_in_last": sum(1 for v in last.values() if str(v) in expected),
        "expected_anywhere": sum(1 for s in strings if s in expected),
        "format_is_input_format": sum(1 for k, v in values
                                      if k == "format" and v == ex.inputs.get("format")),
    }


def document(ex: Example, view: str) -> str:
    tokens = plan_tokens(ex)
    if view == "plan+task":
        tokens += [f"{k}_{int(min(v, 5))}" if k != "order_inversions" else f"{k}_{v > 0}"
                   for k, v in task_tests(ex).items()]
        tokens += [f"{k}_{'in' if str(v) in ex.text else 'out'}"
                   for s in ex.steps for k, v in s["arguments"].items()]
    return " ".join(tokens)


# --- the tree family's features -------------------------------------------------------------
@dataclass
class GenuineModel:
    """What genuine training plans teach: transitions, precedences, (tool, source) pairs and
    argument-key sets that occur in them."""

    transitions: set[tuple[str, str]]
    before: Counter[tuple[str, str]]
    sources: set[tuple[str, str]]
    keysets: set[tuple[str, tuple[str, ...]]]

    @classmethod
    def learn(cls, plans: Iterable[Example]) -> GenuineModel:
        model = cls(set(), Counter(), set(), set())
        for ex in plans:
            tools = ["START", *(str(s["tool"]) for s in ex.steps), "END"]
            model.transitions.update(itertools.pairwise(tools))
            for i, a in enumerate(tools[1:-1]):
                for b in tools[i + 2:-1]:
                    model.before[(a, b)] += 1
            for s in ex.steps:
                args = s["arguments"]
                model.sources.add((str(s["tool"]), str(args.get("source"))))
                model.keysets.add((str(s["tool"]), tuple(sorted(args))))
        return model

    def features(self, ex: Example, registry: ToolRegistry) -> list[float]:
        tools = [str(s["tool"]) for s in ex.steps]
        seq = ["START", *tools, "END"]
        roles = Counter(registry[t].role.value if t in registry else "unknown" for t in tools)
        args = [s["arguments"] for s in ex.steps]
        against = sum(1 for i, a in enumerate(tools) for b in tools[i + 1:]
                      if self.before[(b, a)] > 0 and self.before[(a, b)] == 0)
        return [
            len(tools), len(set(tools)), len(tools) - len(set(tools)),
            *(roles.get(r, 0) for r in ("source", "processor", "aggregator", "output",
                                        "utility")),
            sum(len(a) for a in args), sum("source" in a for a in args),
            sum("format" in a for a in args),
            sum(1 for p in itertools.pairwise(seq) if p not in self.transitions),
            against,
            sum(1 for s in ex.steps
                if (str(s["tool"]), str(s["arguments"].get("source"))) not in self.sources),
            sum(1 for s in ex.steps
                if (str(s["tool"]), tuple(sorted(s["arguments"]))) not in self.keysets),
            sum(1 for s in ex.steps for k, v in s["arguments"].items()
                if k == "source" and v not in tools[:tools.index(str(s["tool"]))]),
        ]


def tree_features(exs: Sequence[Example], model: GenuineModel, view: str,
                  registry: ToolRegistry) -> np.ndarray:
    rows = []
    for ex in exs:
        row = model.features(ex, registry)
        if view == "plan+task":
            row += list(task_tests(ex).values())
        rows.append(row)
    return np.array(rows, dtype=float)


# --- training and scoring -------------------------------------------------------------------
def folds(exs: Sequence[Example], k: int, seed: int) -> list[np.ndarray]:
    """Example indices of each fold, whole tasks per fold (both plans of a task together)."""
    ids = sorted({ex.task_id for ex in exs})
    rng = np.random.default_rng(seed)
    rng.shuffle(ids)
    fold_of = {tid: i % k for i, tid in enumerate(ids)}
    return [np.array([i for i, ex in enumerate(exs) if fold_of[ex.task_id] == f])
            for f in range(k)]


def held_out_auc(exs: Sequence[Example], family: str, view: str, registry: ToolRegistry,
                 *, seed: int, k: int = 3) -> float:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    labels = np.array([ex.flawed for ex in exs], dtype=int)
    scores = np.zeros(len(exs))
    parts = folds(exs, k, seed)
    for f, test in enumerate(parts):
        train = np.concatenate([p for g, p in enumerate(parts) if g != f])
        if family == "linear":
            vectorizer = TfidfVectorizer(ngram_range=(1, 3), token_pattern=r"\S+",
                                         min_df=2, sublinear_tf=True)
            x_train = vectorizer.fit_transform([document(exs[i], view) for i in train])
            x_test = vectorizer.transform([document(exs[i], view) for i in test])
            classifier: Any = LogisticRegression(C=4.0, max_iter=2000)
        else:
            model = GenuineModel.learn(exs[i] for i in train if not exs[i].flawed)
            x_train = tree_features([exs[i] for i in train], model, view, registry)
            x_test = tree_features([exs[i] for i in test], model, view, registry)
            classifier = HistGradientBoostingClassifier(max_iter=200, random_state=seed)
        classifier.fit(x_train, labels[train])
        scores[test] = classifier.predict_proba(x_test)[:, 1]
    return float(np.mean([roc_auc_score(labels[p], scores[p]) for p in parts]))


def sample(tasks: Sequence[Task], count: int) -> list[Task]:
    step = max(1, len(tasks) // count)
    return list(tasks[::step][:count])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task-set", default="default")
    parser.add_argument("--tasks", type=int, default=1500)
    parser.add_argument("--severities", default="light,medium")
    parser.add_argument("--flaws", default=",".join(FLAWS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the table here")
    args = parser.parse_args()
    registry = default_registry()
    tasks = sample(list(load_tasks(TASK_SETS.get(args.task_set) or Path(args.task_set))),
                   args.tasks)
    start = time.process_time()
    table: dict[str, dict[str, float]] = {}
    print(f"held-out ROC AUC over {len(tasks)} tasks of {args.task_set} (3 folds by task, "
          f"seed {args.seed}); 0.5 = chance")
    columns = [f"{family}/{view}" for view in VIEWS for family in FAMILIES]
    print(f"{'flaw':24} {'severity':8} " + " ".join(f"{c:>17}" for c in columns))
    for severity in args.severities.split(","):
        for flaw in args.flaws.split(","):
            exs = examples(tasks, flaw, severity, registry)
            row = {c: held_out_auc(exs, c.split("/")[0], c.split("/")[1], registry,
                                   seed=args.seed) for c in columns}
            table[f"{flaw}/{severity}"] = row
            print(f"{flaw:24} {severity:8} " + " ".join(f"{row[c]:17.3f}" for c in columns),
                  flush=True)
    print(f"CPU {time.process_time() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
