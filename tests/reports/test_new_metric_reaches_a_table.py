"""A new metric reaches a table with its interval from its registration alone (issue 28).

The metric is registered here as it would be in ``src/polymnesia/metrics/classification.py``:
a pure function plus, in ``items=``, how it is recomputed on ``label`` items. Nothing else
is edited: ``ItemSet.statistic`` finds the rule in the registry, so the per-score interval,
the group table's stratified interval and the paired test between two arms all follow.
docs/architecture.md's checklist counts the files a new metric touches under src/.
"""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.items import ItemSet, group_intervals, scores_with_intervals
from polymnesia.metrics.base import METRICS, ItemRule, register_metric
from polymnesia.metrics.uncertainty import ItemStatistic, paired_bootstrap
from polymnesia.reports.table_core import to_markdown
from polymnesia.reports.tables import group_table

NAME = "test_balanced_accuracy"


def _balanced(pred: np.ndarray, gold: np.ndarray) -> float:
    """Mean over gold labels of the share predicted right (balanced accuracy)."""
    return float(np.mean([np.mean(pred[gold == k] == k) for k in np.unique(gold)]))


def _rule() -> ItemRule:
    def reduce(x: np.ndarray) -> np.ndarray:  # [B, n, 2] (pred, gold) -> [B]
        pred, gold = x[..., 0], x[..., 1]
        recalls = []
        for k in (0.0, 1.0):
            is_k = gold == k
            hit = np.sum(is_k & (pred == k), axis=-1)
            recalls.append(np.where(is_k.sum(-1) > 0, hit / np.maximum(is_k.sum(-1), 1), np.nan))
        return np.nanmean(np.stack(recalls), axis=0)

    return lambda c, _n: ItemStatistic(np.stack([c["pred"], c["gold"]], axis=1), reduce, NAME)


if NAME not in METRICS:  # the one edit under src/: a registration with its resampling rule
    register_metric(NAME, higher_is_better=True, items={"label": _rule()})(_balanced)


def _items(model: str, lang: str, right: float, seed: int, n: int = 80) -> ItemSet:
    rng = np.random.default_rng(seed)
    gold = (rng.random(n) < 0.3).astype(float)
    pred = np.where(rng.random(n) < right, gold, 1 - gold)
    cols = {"pred": pred.tolist(), "gold": gold.tolist()}
    return ItemSet(model, lang, "label", list(range(n)), cols, task="t", n_labels=2)


def test_a_registered_metric_gets_intervals_a_table_and_paired_tests() -> None:
    sets = [
        _items(model, lang, right, 10 * i + j)
        for i, (model, right) in enumerate((("A", 0.9), ("B", 0.6)))
        for j, lang in enumerate(("fr", "de"))
    ]
    scores = [
        s
        for items in sets
        for s in scores_with_intervals(items, [NAME], model=items.model, lang=items.lang, task="t")
    ]
    for s, items in zip(scores, sets, strict=True):
        c = {k: np.asarray(v) for k, v in items.columns.items()}
        assert s.value == pytest.approx(_balanced(c["pred"], c["gold"]))  # the function's value
        assert s.ci_low is not None and s.ci_high is not None and s.ci_low < s.value < s.ci_high
        assert s.n == 80
    groups = {"romance": ["fr"], "germanic": ["de"]}
    ivs = group_intervals(sets, NAME, groups)
    table = group_table(scores, NAME, groups, name="t", title="t", intervals=ivs)
    text = to_markdown(table)
    assert text.count("±") == 6  # every group mean of both arms carries its interval
    assert "(Higher is better)" in table.caption  # the registration's direction
    a = [s.statistic(NAME) for s in sets if s.model == "A"]
    b = [s.statistic(NAME) for s in sets if s.model == "B"]
    # paired over the same items (ids 0..79 in both arms)
    test = paired_bootstrap(a, b, n_resamples=300)
    assert test.effect > 0 and test.low > 0
