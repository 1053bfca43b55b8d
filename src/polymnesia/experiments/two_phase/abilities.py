"""English and multilingual ability (the two-phase CFT paper, Tables 1, 2 and 5) from the harness
stages'
per-document items, with bootstrap intervals and paired differences.

Each task contributes one score per model, the mean of a per-document value of its
primary metric (accuracy for multiple choice, strict prompt-level accuracy for
IFEval-style tasks, sentence chrF / 100 for generation), read from the ``docs`` item
sets the ``evaluate_harness`` stage keeps (:mod:`polymnesia.harness.items`); EA and MA
average the tasks of their list with equal weight, as the paper averages its
benchmarks, and "Combined" weights each of EA and MA by one half. Intervals are the
shared bootstraps of :mod:`polymnesia.metrics.uncertainty`: documents resampled within
each task (stratified bootstrap), and for a difference between two models the same
documents for both (paired bootstrap, Koehn 2004), which is what makes a claim's
interval narrow enough to mean something with a few hundred items. A task's weight
scales its statistic, so the shared mean over tasks is the weighted mean.

With several training seeds (``seeds: [..]``) a model is one :class:`Ability` per seed,
scored on the same documents: :func:`pooled_interval` and :func:`pooled_difference` give the
mean over seeds with :func:`~polymnesia.metrics.hierarchical.hierarchical_bootstrap_ci`
(the variance of a document bootstrap of the mean over seeds, one resample within each task
shared by the seeds and, for a difference, by both models, plus ``s^2 / k`` over the seeds,
with a Student t quantile at Welch-Satterthwaite degrees of freedom), so an interval covers
training randomness and the test documents together. With one seed they are
:func:`ability_interval` and :func:`paired_difference`, unchanged.

The harness's own corpus-level chrF (lm-eval's aggregation) can differ from the mean
sentence chrF used here; the per-task tables show lm-eval's numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polymnesia.errors import DataError
from polymnesia.harness.items import CHANCE, SENTENCE_CHRF
from polymnesia.items import ItemSet, across_seeds, aligned
from polymnesia.metrics.hierarchical import hierarchical_bootstrap_ci, paired_hierarchical_bootstrap
from polymnesia.metrics.seed_items import Shared
from polymnesia.metrics.uncertainty import (
    DEFAULT_RESAMPLES,
    Interval,
    ItemStatistic,
    PairedTest,
    mean_statistic,
    paired_bootstrap,
    stratified_bootstrap_ci,
)

#: the per-document metric of each task family (lm-eval's names), in order of preference
PRIMARY = ("prompt_level_strict_acc", "acc", "exact_match", "f1", "acc_norm", SENTENCE_CHRF)


def primary_column(items: ItemSet) -> str:
    """The column of a task's documents that its ability counts (the first of :data:`PRIMARY`)."""
    for m in PRIMARY:
        if m in items.columns:
            return m
    raise DataError(
        f"task {items.task} of {items.model}: no per-document metric among {', '.join(PRIMARY)} in "
        f"its items (columns: {', '.join(sorted(items.columns)) or 'none'})"
    )


@dataclass(frozen=True)
class Ability:
    """One model's per-document items on a list of tasks (``items[task]``), with each task's
    weight (``None``: equal weights)."""

    items: dict[str, ItemSet]
    weights: dict[str, float] | None = None

    @property
    def tasks(self) -> list[str]:
        return list(self.items)

    def _w(self) -> dict[str, float]:
        return _weights(self.tasks, self.weights)

    def strata(self, items: Mapping[str, ItemSet] | None = None) -> list[ItemStatistic]:
        """One statistic per task (of ``items``, default this model's), scaled by
        ``len(tasks) * weight`` so that the shared bootstraps' mean over strata is the
        weighted mean."""
        w, k, sets = self._w(), len(self.tasks), items or self.items
        return [
            _scaled(mean_statistic(sets[t].columns[primary_column(sets[t])], t), k * w[t])
            for t in self.tasks
        ]

    def score(self) -> float:
        w = self._w()
        return float(
            sum(w[t] * np.mean(s.columns[primary_column(s)]) for t, s in self.items.items())
        )

    @property
    def n(self) -> int:
        return sum(s.n for s in self.items.values())

    def chance(self) -> float | None:
        """The score of uniform guessing: the weighted mean over tasks of each document's
        chance accuracy (:data:`~polymnesia.harness.items.CHANCE`), where every task is
        multiple choice scored by accuracy; None otherwise (a generative task has no chance
        score of its own)."""
        w = self._w()
        total = 0.0
        for t, s in self.items.items():
            if CHANCE not in s.columns or primary_column(s) != "acc":
                return None
            total += w[t] * float(np.mean(s.columns[CHANCE]))
        return total


def _scaled(stat: ItemStatistic, factor: float) -> ItemStatistic:
    if factor == 1.0:
        return stat
    reduce = stat.reduce
    return ItemStatistic(stat.columns, lambda x: factor * reduce(x), stat.name)


def _weights(tasks: Sequence[str], weights: Mapping[str, float] | None) -> dict[str, float]:
    if weights is None:
        return {t: 1.0 / len(tasks) for t in tasks}
    total = sum(weights[t] for t in tasks)
    return {t: weights[t] / total for t in tasks}


def ability(sets: Sequence[ItemSet], tasks: Sequence[str], model: str) -> Ability:
    """The :class:`Ability` of ``tasks`` from one model's ``docs`` item sets."""
    by_task = {s.task: s for s in sets}
    missing = [t for t in tasks if t not in by_task]
    if missing:
        raise DataError(
            f"{model}: the harness kept no per-document items for {', '.join(missing)} "
            "(evaluate_harness writes them when lm-eval logs samples); run the experiment again"
        )
    return Ability({t: by_task[t] for t in tasks})


def ability_interval(
    a: Ability, *, n_resamples: int = DEFAULT_RESAMPLES, level: float = 0.95, seed: int = 0
) -> Interval:
    """The weighted mean over tasks with a stratified percentile bootstrap interval."""
    iv = stratified_bootstrap_ci(a.strata(), n_resamples=n_resamples, level=level, seed=seed)
    method = f"stratified bootstrap over {a.n} documents of {len(a.tasks)} tasks"
    return Interval(a.score(), iv.low, iv.high, a.n, level, method)


def paired_difference(
    a: Ability,
    b: Ability,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> PairedTest:
    """``score(a) - score(b)`` on the same documents: paired bootstrap within each task."""
    xs, ys = _paired_strata(a, b)
    return paired_bootstrap(xs, ys, n_resamples=n_resamples, level=level, seed=seed)


def _paired_strata(a: Ability, b: Ability) -> tuple[list[ItemStatistic], list[ItemStatistic]]:
    """Both models' per-task statistics on the same documents in one order."""
    if a.tasks != b.tasks:
        raise DataError(f"models scored on different tasks: {a.tasks} vs {b.tasks}")
    xs, ys = {}, {}
    for t in a.tasks:
        if a.items[t].n != b.items[t].n:
            raise DataError(
                f"task {t}: {a.items[t].n} vs {b.items[t].n} documents; cannot pair them"
            )
        xs[t], ys[t] = aligned(a.items[t], b.items[t])  # the same documents in one order
    return a.strata(xs), b.strata(ys)


def _same_documents(per_seed: Sequence[Ability], what: str) -> None:
    """Every seed's ability on the same tasks with as many documents (the pooled intervals
    resample the documents of a task as one stratum, shared by the seeds)."""
    if not per_seed:
        raise DataError(f"{what}: no training seed to pool")
    shape = [(t, s.n) for t, s in per_seed[0].items.items()]
    for a in per_seed[1:]:
        other = [(t, s.n) for t, s in a.items.items()]
        if other != shape:
            raise DataError(
                f"{what}: the training seeds were scored on different tasks or document "
                f"counts ({shape} vs {other}); evaluate every seed on the same harness tasks"
            )


def _seed_aligned(per_seed: Sequence[Ability]) -> tuple[list[Ability], Shared]:
    """Each seed's documents matched by id to the first seed's, and which documents every
    seed was scored on (the crossed part of the design; the rest is nested):
    :func:`across_seeds`, one stratum per task. A harness stage may write a task's
    documents in another order for each seed, so pairing them by position would pair
    different documents."""
    tasks = per_seed[0].tasks
    strata, shared = across_seeds([[(a.items[t],) for t in tasks] for a in per_seed])
    out = [
        Ability({t: x[0] for t, x in zip(tasks, seed, strict=True)}, a.weights)
        for seed, a in zip(strata, per_seed, strict=True)
    ]
    return out, shared


def pooled_score(per_seed: Sequence[Ability]) -> float:
    """The mean over training seeds of each seed's score (one seed: its score)."""
    scores = [a.score() for a in per_seed]
    return scores[0] if len(scores) == 1 else float(np.mean(scores))


def pooled_interval(
    per_seed: Sequence[Ability],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> Interval:
    """The mean over training seeds of a model's ability, its interval over seeds and
    documents (:func:`~polymnesia.metrics.hierarchical.hierarchical_bootstrap_ci`; one seed:
    :func:`ability_interval`)."""
    _same_documents(per_seed, "pooled ability")
    if len(per_seed) == 1:
        return ability_interval(per_seed[0], n_resamples=n_resamples, level=level, seed=seed)
    per_seed, shared = _seed_aligned(per_seed)
    iv = hierarchical_bootstrap_ci(
        [a.strata() for a in per_seed],
        n_resamples=n_resamples,
        level=level,
        seed=seed,
        shared_items=shared,
    )
    first = per_seed[0]
    method = iv.method.replace(
        f" {iv.n} items ", f" {first.n} documents of {len(first.tasks)} tasks "
    )
    return Interval(pooled_score(per_seed), iv.low, iv.high, first.n, level, method)


def pooled_difference(
    a: Sequence[Ability],
    b: Sequence[Ability],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
    seed: int = 0,
) -> PairedTest:
    """``mean_seeds(score(a)) - mean_seeds(score(b))``: seed ``i`` of ``a`` paired with seed
    ``i`` of ``b`` and, within a seed, the same documents for both
    (:func:`~polymnesia.metrics.hierarchical.paired_hierarchical_bootstrap`); one seed:
    :func:`paired_difference`."""
    if len(a) != len(b):
        raise DataError(f"cannot pair {len(a)} training seeds with {len(b)}")
    _same_documents(a, "pooled difference")
    _same_documents(b, "pooled difference")
    if len(a) == 1:
        return paired_difference(a[0], b[0], n_resamples=n_resamples, level=level, seed=seed)
    a, shared = _seed_aligned(a)  # b follows a within each seed (_paired_strata)
    pairs = [_paired_strata(x, y) for x, y in zip(a, b, strict=True)]
    return paired_hierarchical_bootstrap(
        [x for x, _ in pairs],
        [y for _, y in pairs],
        n_resamples=n_resamples,
        level=level,
        seed=seed,
        shared_items=shared,
    )


def combined(ea: Ability, ma: Ability) -> Ability:
    """EA and MA tasks together, weighted so the score is ``(EA + MA) / 2`` (Table 5's
    "Combined").
    """
    items = {
        **{f"EA:{t}": s for t, s in ea.items.items()},
        **{f"MA:{t}": s for t, s in ma.items.items()},
    }
    w = {f"EA:{t}": 0.5 / len(ea.tasks) for t in ea.tasks}
    w.update({f"MA:{t}": 0.5 / len(ma.tasks) for t in ma.tasks})
    return Ability(items, w)
