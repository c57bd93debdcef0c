"""Shallow learned detectors of flawed plans (issue 50): can a model with no meaning, trained on
other tasks' genuine and flawed plans, tell a flawed plan from the genuine one?

One home for the features and models that the generator's adversarial filter trains
(`adversarial_filter.py`) and that bench/bench_flaw_detectors.py measures, so the bench scores
exactly what the filter was up against. Two families, each on two views:

- linear: logistic regression over word 1-3 grams of a tokenised plan (tools, argument keys,
  argument values by shape, purposes, step-to-step transitions);
- trees: gradient-boosted trees (scikit-learn's HistGradientBoosting) over structural features:
  step count, repeats, roles, argument counts, and what genuine training plans teach (tool
  transitions, precedences, (tool, source) pairs and argument-key sets never seen in them).

Views: `plan` (the plan block alone) and `plan+task` (plus string tests against the task's text:
plan values found in the text, Inputs values the plan leaves unused, the text order of the values
against the plan's, the Expected-outputs values in the last step).

Needs scikit-learn (the `solver` extra), imported inside the functions that train.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_resilibench.core.registry import ToolRegistry
from pytest_resilibench.core.tasks import Task
from pytest_resilibench.core.workflow import Workflow

__all__ = ["DETECTORS", "FAMILIES", "VIEWS", "Detector", "Example", "example", "folds",
           "held_out_auc"]

FAMILIES = ("linear", "trees")
VIEWS = ("plan", "plan+task")
# Every (family, view) pair: the ensemble the filter hides from and the bench's columns.
DETECTORS = tuple((family, view) for view in VIEWS for family in FAMILIES)


@dataclass(frozen=True)
class Example:
    """One plan of one task: what a detector sees, and whether it is flawed."""

    task_id: str
    text: str  # the task's text before the plan: statement, Inputs, Expected outputs
    inputs: Mapping[str, Any]
    expected: Mapping[str, Any]
    steps: tuple[Mapping[str, Any], ...]  # {"tool", "arguments", "purpose"}
    flawed: bool


def example(task: Task, plan: Workflow, *, flawed: bool) -> Example:
    """The example of a task's plan (genuine or flawed)."""
    steps = tuple({"tool": s.tool, "arguments": dict(s.arguments), "purpose": s.purpose}
                  for s in plan.steps)
    return Example(task.id, task.description, dict(task.shown_inputs),
                   dict(task.expected_outputs), steps, flawed)


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


# --- one detector ---------------------------------------------------------------------------
class Detector:
    """One (family, view) detector: fitted on labelled examples, it scores others (the
    probability that a plan is flawed). Deterministic for a seed."""

    def __init__(self, family: str, view: str, registry: ToolRegistry, *, seed: int) -> None:
        if family not in FAMILIES or view not in VIEWS:
            raise ValueError(f"unknown detector {family}/{view}")
        self.family, self.view, self.registry, self.seed = family, view, registry, seed
        self._model: Any = None
        self._encode: Any = None

    def fit(self, exs: Sequence[Example]) -> Detector:
        labels = np.array([ex.flawed for ex in exs], dtype=int)
        with _one_thread():
            self._fit(exs, labels)
        return self

    def _fit(self, exs: Sequence[Example], labels: np.ndarray) -> None:
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression

        if self.family == "linear":
            vectorizer = TfidfVectorizer(ngram_range=(1, 3), token_pattern=r"\S+",
                                         min_df=2, sublinear_tf=True)
            x = vectorizer.fit_transform([document(ex, self.view) for ex in exs])
            self._encode = lambda batch: vectorizer.transform(
                [document(ex, self.view) for ex in batch])
            self._model = LogisticRegression(C=4.0, max_iter=2000)
        else:
            genuine = GenuineModel.learn(ex for ex in exs if not ex.flawed)
            x = tree_features(exs, genuine, self.view, self.registry)
            self._encode = lambda batch: tree_features(batch, genuine, self.view,
                                                       self.registry)
            self._model = HistGradientBoostingClassifier(max_iter=200, random_state=self.seed)
        self._model.fit(x, labels)

    def score(self, exs: Sequence[Example]) -> np.ndarray:
        if not exs:
            return np.zeros(0)
        with _one_thread():
            return np.asarray(self._model.predict_proba(self._encode(exs))[:, 1])


def _one_thread() -> Any:
    """OpenMP on one thread: the trees' threads fight over a shared machine's cores (30x
    slower on a loaded 2-core box) and gain nothing on these small sets."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


# --- held-out evaluation --------------------------------------------------------------------
def folds(task_ids: Iterable[str], k: int, seed: int) -> list[set[str]]:
    """The task ids of each of `k` folds (whole tasks per fold), shuffled by `seed`."""
    ids = sorted(set(task_ids))
    rng = np.random.default_rng(seed)
    rng.shuffle(ids)
    return [set(ids[f::k]) for f in range(k)]


def held_out_auc(exs: Sequence[Example], family: str, view: str, registry: ToolRegistry,
                 *, seed: int, k: int = 3) -> float:
    """The mean ROC AUC of a detector over `k` folds by task, each scored by a detector
    trained on the other folds' tasks."""
    from sklearn.metrics import roc_auc_score

    aucs = []
    for test_ids in folds((ex.task_id for ex in exs), k, seed):
        train = [ex for ex in exs if ex.task_id not in test_ids]
        test = [ex for ex in exs if ex.task_id in test_ids]
        scores = Detector(family, view, registry, seed=seed).fit(train).score(test)
        aucs.append(roc_auc_score([ex.flawed for ex in test], scores))
    return float(np.mean(aucs))
