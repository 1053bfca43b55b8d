"""English and multilingual ability (paper 002, Tables 1, 2 and 5) from the harness stages'
per-document results, with bootstrap intervals and paired differences.

Each task contributes one score per model, the mean of a per-document value
of its primary metric (accuracy for multiple choice, strict prompt-level
accuracy for IFEval-style tasks, sentence chrF / 100 for generation);
EA and MA average the tasks of their list with equal weight, as the paper
averages its benchmarks. Intervals resample documents within each task
(stratified bootstrap); differences between two models resample the same
documents for both (paired bootstrap, Koehn 2004), which is what makes a
claim's interval narrow enough to mean something with a few hundred items.

The harness's own corpus-level chrF (lm-eval's aggregation) can differ from
the mean sentence chrF used here; the per-task tables show lm-eval's numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sacrebleu.metrics import CHRF

from polymnesia.errors import DataError
from polymnesia.metrics.uncertainty import Interval, PairedTest, percentile_interval

#: the per-document metric of each task family (lm-eval's names), in order of preference
PRIMARY = ("prompt_level_strict_acc", "acc", "exact_match", "f1", "acc_norm")
_CHRF = CHRF()


@dataclass(frozen=True)
class Ability:
    """Per-document values of one model on a list of tasks (``values[task]``: ``[n_docs]``)."""

    values: dict[str, np.ndarray]

    @property
    def tasks(self) -> list[str]:
        return list(self.values)

    def score(self, weights: Mapping[str, float] | None = None) -> float:
        w = _weights(self.tasks, weights)
        return float(sum(w[t] * self.values[t].mean() for t in self.tasks))


def _weights(tasks: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        return {t: 1.0 / len(tasks) for t in tasks}
    total = sum(weights[t] for t in tasks)
    return {t: weights[t] / total for t in tasks}


def _doc_value(rec: dict[str, object]) -> float:
    for m in PRIMARY:
        v = rec.get(m)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, bool):
            return float(v)
    if "chrf" in rec:  # a (reference, prediction) pair: sentence chrF on the 0-1 scale
        pair = rec["chrf"]
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            ref, pred = (str(x[0] if isinstance(x, list) else x) for x in pair)
            return _CHRF.sentence_score(pred, [ref]).score / 100.0
    raise DataError(f"no per-document metric among {PRIMARY} or chrf in {sorted(rec)}")


def read_task_values(stage_dir: Path, task: str) -> np.ndarray:
    """Per-document values of ``task`` from an ``evaluate_harness`` stage's samples file."""
    path = stage_dir / "lm_eval" / f"samples_{task}.jsonl"
    if not path.is_file():
        raise DataError(f"{path} is missing: the harness stage kept no samples for {task}")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    rows.sort(key=lambda r: int(r.get("doc_id", 0)))
    return np.asarray([_doc_value(r) for r in rows], dtype=float)


def read_ability(stage_dir: Path, tasks: Sequence[str]) -> Ability:
    return Ability({t: read_task_values(stage_dir, t) for t in tasks})


def _replicates(
    a: Ability, b: Ability | None, weights: Mapping[str, float] | None, n_resamples: int, seed: int
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = _weights(a.tasks, weights)
    reps = np.zeros(n_resamples)
    for t in a.tasks:
        x = a.values[t]
        idx = rng.integers(0, len(x), size=(n_resamples, len(x)))
        diff = x[idx].mean(axis=1)
        if b is not None:
            y = b.values[t]
            if len(y) != len(x):
                raise DataError(f"task {t}: {len(x)} vs {len(y)} documents; cannot pair them")
            diff = diff - y[idx].mean(axis=1)
        reps += w[t] * diff
    return reps


def ability_interval(
    a: Ability,
    weights: Mapping[str, float] | None = None,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """The weighted mean over tasks with a stratified percentile bootstrap interval."""
    lo, hi = percentile_interval(_replicates(a, None, weights, n_resamples, seed), level)
    n = sum(len(v) for v in a.values.values())
    return Interval(a.score(weights), lo, hi, n, level, f"stratified bootstrap over {n} documents")


def paired_difference(
    a: Ability,
    b: Ability,
    weights: Mapping[str, float] | None = None,
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> PairedTest:
    """``score(a) - score(b)`` on the same documents: paired bootstrap within each task."""
    if a.tasks != b.tasks:
        raise DataError(f"models scored on different tasks: {a.tasks} vs {b.tasks}")
    reps = _replicates(a, b, weights, n_resamples, seed)
    lo, hi = percentile_interval(reps, level)
    p = min(1.0, 2 * min(float(np.mean(reps <= 0)), float(np.mean(reps >= 0))))
    n = sum(len(v) for v in a.values.values())
    effect = a.score(weights) - b.score(weights)
    method = f"paired bootstrap over {n} documents ({n_resamples} resamples)"
    return PairedTest(effect, lo, hi, p, n, method, level, n_resamples)


def combined(ea: Ability, ma: Ability) -> tuple[Ability, dict[str, float]]:
    """EA and MA tasks together, weighted so the score is ``(EA + MA) / 2`` (Table 5's "Combined")."""
    values = {
        **{f"EA:{t}": v for t, v in ea.values.items()},
        **{f"MA:{t}": v for t, v in ma.values.items()},
    }
    w = {f"EA:{t}": 0.5 / len(ea.tasks) for t in ea.tasks}
    w.update({f"MA:{t}": 0.5 / len(ma.tasks) for t in ma.tasks})
    return Ability(values), w
