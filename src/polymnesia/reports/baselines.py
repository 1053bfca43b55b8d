"""Chance and majority-class scores of a labelled test set (:func:`label_baselines`), so a
report can say whether a task model learned anything: the floor a score must pass
(:func:`learned_floor`, :func:`learned`, :func:`learned_arms_of`), the claim that a model
beats it (:func:`baseline_claim`) and the tables that show it (:func:`baseline_table`,
:func:`trivial_table`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.claims import Claim, claim_from_interval
from polymnesia.reports.table_core import Estimate, Table


@dataclass(frozen=True)
class Baselines:
    """Scores a model reaches without learning, on a test set with ``n`` gold labels of ``n_labels``
    classes.

    ``chance_*``: guessing uniformly at random (accuracy ``1/k``; macro-F1 at
    the expected counts, ``mean_l 2 p_l (1/k) / (p_l + 1/k)`` for class shares
    ``p_l``). ``majority_*``: always answering the most frequent class
    (accuracy ``p_max``; macro-F1 ``2 p_max / (1 + p_max) / k``, the other
    classes scoring 0).
    """

    n: int
    n_labels: int
    majority_label: int
    chance_accuracy: float
    chance_macro_f1: float
    majority_accuracy: float
    majority_macro_f1: float

    def chance(self, metric: str) -> float:
        return self._pick(metric, self.chance_accuracy, self.chance_macro_f1)

    def majority(self, metric: str) -> float:
        return self._pick(metric, self.majority_accuracy, self.majority_macro_f1)

    @staticmethod
    def _pick(metric: str, acc: float, f1: float) -> float:
        if metric == "accuracy":
            return acc
        if metric == "macro_f1":
            return f1
        raise PolymnesiaError(f"no baseline for metric '{metric}'; accepted: accuracy, macro_f1")


def label_baselines(gold: npt.ArrayLike, n_labels: int | None = None) -> Baselines:
    """Chance and majority-class baselines of the gold labels ``gold`` (ints ``0..n_labels-1``)."""
    g = np.asarray(gold).astype(int)
    if g.ndim != 1 or g.size == 0:
        raise PolymnesiaError("baselines need a non-empty list of gold labels")
    k = int(n_labels) if n_labels is not None else int(g.max()) + 1
    if k < 2 or g.min() < 0 or g.max() >= k:
        raise PolymnesiaError(f"gold labels must lie in 0..{k - 1} with at least 2 classes")
    share = np.bincount(g, minlength=k) / g.size
    top = int(np.argmax(share))
    chance_f1 = float(np.mean(2 * share * (1 / k) / (share + 1 / k)))
    p = float(share[top])
    return Baselines(int(g.size), k, top, 1 / k, chance_f1, p, 2 * p / (1 + p) / k)


def baseline_claim(model: str, scope: str, metric: str, score: Interval, base: Baselines) -> Claim:
    """ "MODEL learned the task on SCOPE": its score minus the majority-class baseline is > 0."""
    return claim_from_interval(
        f"{model} scores above the majority-class baseline on {scope} ({metric})",
        +1,
        score,
        reference=base.majority(metric),
        effect_label=f"{metric} − majority",
    )


def learned_floor(base: Baselines, metric: str) -> float:
    """The score a task model must reach to count as having learned: twice the larger of
    uniform chance and the majority-class score, ``2 b``; where ``2 b`` is out of reach
    (``b > 1/3``: binary accuracy, a skewed test set) halfway from ``b`` to a perfect score,
    ``(1 + b) / 2`` instead. A claim resting on an arm below it is "not testable"
    (docs/reports.md, "Did the task models learn?")."""
    b = max(base.chance(metric), base.majority(metric))
    return min(2 * b, (1 + b) / 2)


def learned(score: float, base: Baselines, metric: str) -> bool:
    """Whether ``score`` reaches :func:`learned_floor` (NaN: no)."""
    return math.isfinite(score) and score >= learned_floor(base, metric)


def learned_arms_of(
    rows: Sequence[tuple[str, str, str, Interval, Baselines]], scope: str | None = None
) -> dict[str, bool]:
    """``{model: learned?}`` from :func:`baseline_table`'s rows (of ``scope`` when given): an arm
    learned when every one of its rows reaches :func:`learned_floor`."""
    out: dict[str, bool] = {}
    for model, where, metric, iv, base in rows:
        if scope is None or where == scope:
            out[model] = out.get(model, True) and learned(iv.estimate, base, metric)
    return out


def baseline_table(
    rows: Sequence[tuple[str, str, str, Interval, Baselines]],
    name: str = "baselines",
    title: str = "Did the task models learn? Scores against chance and majority-class baselines",
    fmt: str = ".3f",
) -> Table:
    """One row per ``(model, scope, metric, score interval, baselines)``.

    "x baseline" is the score divided by the larger of chance and majority;
    "Learned" reads "learned" when the score reaches :func:`learned_floor`
    (twice that baseline), "above baseline, below 2x" when its interval lies
    above the baseline but the score is short of the floor, and "did not
    learn" otherwise. A claim that rests on an arm that did not reach the
    floor is not testable.
    """
    out: list[list[object]] = []
    for _model, scope, metric, iv, base in rows:
        top = max(base.chance(metric), base.majority(metric))
        if learned(iv.estimate, base, metric):
            verdict = "learned"
        elif math.isfinite(iv.low) and iv.low > top:
            verdict = "above baseline, below 2x"
        else:
            verdict = "did not learn"
        out.append(
            [
                _model,
                scope,
                metric,
                Estimate.of(iv),
                base.chance(metric),
                base.majority(metric),
                iv.estimate / top if top else math.nan,
                verdict,
                base.n,
            ]
        )
    return _learned_table(
        name,
        title,
        ["Chance", "Majority", "x baseline"],
        out,
        "Chance: uniform guessing; majority: always the most frequent class of the test labels; "
        "x baseline: the score over the larger of the two. Learned: the score reaches twice that "
        "baseline (halfway to a perfect score where twice is out of reach); a claim that rests "
        "on an arm that did not learn is not testable.",
    )


def trivial_table(
    rows: Sequence[tuple[str, str, str, Interval, str, float]],
    name: str = "baselines_trivial",
    title: str = "Did the task models learn? Scores against a trivial answer",
    fmt: str = ".3f",
) -> Table:
    """One row per ``(model, scope, metric, score interval, trivial answer, its score)``, for
    tasks without class labels (tagging, extractive QA): "Learned" reads "above the trivial
    answer" when the score's interval lies above that answer's score, "below" when it lies
    below it, "not distinguishable" otherwise."""
    out: list[list[object]] = []
    for model, scope, metric, iv, answer, value in rows:
        if iv.low > value:
            learned = "above the trivial answer"
        elif iv.high < value:
            learned = "below the trivial answer"
        else:
            learned = "not distinguishable"
        ratio = iv.estimate / value if value else math.nan
        out.append([model, scope, metric, Estimate.of(iv), answer, value, ratio, learned, iv.n])
    return _learned_table(
        name,
        title,
        ["Trivial answer", "Its score", "x trivial"],
        out,
        "Trivial answer: what a predictor that learned nothing about the task scores on "
        "the same test items (extractive QA: the whole passage; tagging: the language's most "
        "frequent tag for every word), averaged over the languages like the score.",
        fmt,
    )


def _learned_table(
    name: str,
    title: str,
    baseline_columns: list[str],
    rows: list[list[object]],
    caption: str,
    fmt: str | None = None,
) -> Table:
    """A "did the task models learn?" table: model, languages, metric and score, the
    baseline's columns, then the verdict and n."""
    columns = ["Model", "Languages", "Metric", "Score", *baseline_columns, "Learned", "n"]
    return Table(name, title, columns, rows, caption=caption, floatfmt=fmt)
