"""The evidence a report's claims rest on: arm differences and scores with intervals, from a run's
records.

A report has score records (``results/scores.jsonl``) and, where the stages
kept them, item sets (:func:`polymnesia.items.run_items`). These helpers pick
the right test for what the run has:

* several seeds shared by both arms, with item sets of both arms for every
  seed: the paired test over seeds and items (item bootstrap plus seed variance, Student t)
  (:func:`~polymnesia.metrics.hierarchical.paired_hierarchical_bootstrap`), so
  the interval covers training randomness and the test set together;
* several seeds without item sets: the paired t-test over seeds
  (:func:`~polymnesia.metrics.seed_tests.paired_seed_test`), each seed's
  score first averaged over the selected languages;
* one seed and item sets for both arms: the paired bootstrap over items
  (or the permutation test), items resampled within each language and
  aligned by id (:func:`~polymnesia.metrics.uncertainty.paired_bootstrap`);
* neither: no test (NaN interval; the claim is then inconclusive).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from polymnesia.errors import DataError
from polymnesia.items import BootstrapConfig, ItemSet, across_seeds, aligned, select_items
from polymnesia.metrics.hierarchical import hierarchical_bootstrap_ci, paired_hierarchical_bootstrap
from polymnesia.metrics.seed_tests import combine_independent, paired_seed_test, seed_interval
from polymnesia.metrics.uncertainty import (
    Interval,
    PairedTest,
    paired_bootstrap,
    paired_permutation_test,
    stratified_bootstrap_ci,
)
from polymnesia.reports.baselines import Baselines, label_baselines
from polymnesia.reports.cells import per_seed, record_interval
from polymnesia.results import Score, filter_scores, group_scores, mean

Test = Literal["bootstrap", "permutation"]


def _seed_means(scores: Sequence[Score], metric: str, model: str, **where: Any) -> dict[Any, float]:
    return per_seed(filter_scores(scores, metric=metric, model=model, **where))


def arm_difference(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    metric: str,
    a: str,
    b: str,
    *,
    cfg: BootstrapConfig | None = None,
    test: Test = "bootstrap",
    **where: Any,
) -> PairedTest:
    """``score(a) - score(b)`` on ``metric`` over the records/items matching ``where``.

    ``where`` filters both score records and item sets by identity fields
    (``lang=[...]``, ``group=``, ``setting=``, ``size=``, ...). The score of an
    arm is the mean over the selected languages (as group means are).
    """
    sa, sb = _seed_means(scores, metric, a, **where), _seed_means(scores, metric, b, **where)
    common = [k for k in sa if k in sb]
    if len(common) >= 2:
        per_seed_pairs = [_item_pairs(items, a, b, seed=k, **where) for k in common]
        langs = {tuple(sorted(x.lang for x, _ in p)) for p in per_seed_pairs}
        if all(per_seed_pairs) and len(langs) == 1:
            # one language order; crossed or nested as the seeds' items say (across_seeds)
            strata, shared = across_seeds(per_seed_pairs)
            cfg = cfg or BootstrapConfig()
            return paired_hierarchical_bootstrap(
                [[t[0].statistic(metric) for t in p] for p in strata],
                [[t[1].statistic(metric) for t in p] for p in strata],
                n_resamples=cfg.n_resamples,
                level=cfg.level,
                seed=cfg.seed,
                shared_items=shared,
            )
        return paired_seed_test([sa[k] for k in common], [sb[k] for k in common])
    pairs = _item_pairs(items, a, b, **where)
    if pairs:
        return item_difference(pairs, metric, cfg=cfg, test=test)
    effect = mean(list(sa.values())) - mean(list(sb.values())) if sa and sb else math.nan
    return PairedTest(
        effect, math.nan, math.nan, math.nan, len(common), "no seeds or items to test"
    )


def _item_pairs(
    items: Sequence[ItemSet], a: str, b: str, **where: Any
) -> list[tuple[ItemSet, ItemSet]]:
    fa, fb = select_items(items, model=a, **where), select_items(items, model=b, **where)
    by_lang = {s.lang: s for s in fb}
    if len({s.lang for s in fa}) != len(fa) or len(by_lang) != len(fb):
        raise DataError(
            f"several item sets per language for {a} or {b} (seeds or settings); narrow the "
            "selection"
        )
    return [aligned(s, by_lang[s.lang]) for s in fa if s.lang in by_lang]


def item_difference(
    pairs: Sequence[tuple[ItemSet, ItemSet]],
    metric: str,
    *,
    cfg: BootstrapConfig | None = None,
    test: Test = "bootstrap",
) -> PairedTest:
    """Paired test of ``metric`` between the two sides of aligned item-set pairs (one per
    language).
    """
    cfg = cfg or BootstrapConfig()
    left = [x.statistic(metric) for x, _ in pairs]
    right = [y.statistic(metric) for _, y in pairs]
    if test == "permutation":
        return paired_permutation_test(left, right, n_resamples=cfg.n_resamples, seed=cfg.seed)
    return paired_bootstrap(
        left, right, n_resamples=cfg.n_resamples, level=cfg.level, seed=cfg.seed
    )


def arm_score(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    metric: str,
    model: str,
    *,
    cfg: BootstrapConfig | None = None,
    **where: Any,
) -> Interval:
    """A model's mean ``metric`` over the selected languages, with its interval.

    Several seeds: the interval over seeds and items where every seed has item
    sets in the same languages, else the t-interval over seeds; one seed: a stratified
    bootstrap over the item sets; else the records' own intervals combined; else no interval.
    """
    cfg = cfg or BootstrapConfig()
    chosen = filter_scores(scores, metric=metric, model=model, **where)
    seeds = per_seed(chosen)
    if len(seeds) >= 2:
        per = [select_items(items, model=model, seed=k, **where) for k in seeds]
        if all(per) and len({tuple(sorted(s.lang for s in p)) for p in per}) == 1:
            ordered = [sorted(p, key=lambda s: s.lang) for p in per]
            strata, shared = across_seeds([[(s,) for s in p] for p in ordered])
            return hierarchical_bootstrap_ci(
                [[t[0].statistic(metric) for t in p] for p in strata],
                shared_items=shared,
                n_resamples=cfg.n_resamples,
                level=cfg.level,
                seed=cfg.seed,
            )
        return seed_interval(list(seeds.values()), cfg.level)
    sets = select_items(items, model=model, **where)
    if sets:
        return stratified_bootstrap_ci(
            [s.statistic(metric) for s in sets],
            n_resamples=cfg.n_resamples,
            level=cfg.level,
            seed=cfg.seed,
        )
    if not chosen:
        raise DataError(f"no '{metric}' scores of {model} for {where or 'this run'}")
    by_lang = [g for g in group_scores(chosen, "lang").values()]
    ivs = [record_interval(g[0]) if len(g) == 1 else None for g in by_lang]
    if all(iv is not None for iv in ivs):
        return combine_independent([iv for iv in ivs if iv is not None], cfg.level)
    value = mean([mean([s.value for s in g]) for g in by_lang])
    return Interval(value, math.nan, math.nan, len(chosen), cfg.level, "no interval")


def item_baselines(items: Sequence[ItemSet]) -> Baselines:
    """Chance and majority-class baselines of the gold labels pooled over label item sets."""
    labels = [s for s in items if s.kind == "label"]
    if not labels:
        raise DataError("no labelled items (kind 'label') to compute baselines from")
    gold = np.concatenate([np.asarray(s.columns["gold"], dtype=int) for s in labels])
    n_labels = max((s.n_labels or 0) for s in labels) or None
    return label_baselines(gold, n_labels)
