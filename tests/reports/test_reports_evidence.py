"""Which test backs an arm comparison: seeds, then items, then nothing."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from polymnesia.errors import DataError
from polymnesia.items import BootstrapConfig, ItemSet, across_seeds
from polymnesia.reports.claims import claim_from_test
from polymnesia.reports.evidence import arm_difference, arm_score, item_baselines
from polymnesia.results import Score

CFG = BootstrapConfig(n_resamples=500, seed=0)


def labels(model: str, lang: str, pred: list[int], gold: list[int]) -> ItemSet:
    cols = {"pred": [float(p) for p in pred], "gold": [float(g) for g in gold]}
    return ItemSet(model, lang, "label", [f"v{i}" for i in range(len(pred))], cols, n_labels=3)


def test_seeds_win_when_both_arms_have_several() -> None:
    a, b = [0.5, 0.6, 0.8], [0.4, 0.45, 0.75]  # differences 0.1, 0.15, 0.05
    scores = [Score("A", "fr", "accuracy", v, seed=k) for k, v in enumerate(a)]
    scores += [Score("B", "fr", "accuracy", v, seed=k) for k, v in enumerate(b)]
    t = arm_difference(scores, [], "accuracy", "A", "B")
    assert t.method == "paired t-test over 3 seeds" and t.effect == pytest.approx(0.1)


def test_items_give_a_paired_bootstrap_within_languages() -> None:
    gold = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0] * 4
    a = [labels("A", lang, gold, gold) for lang in ("fr", "de")]  # always right
    b = [labels("B", lang, [0] * 40, gold) for lang in ("fr", "de")]  # always class 0
    scores = [Score(s.model, s.lang, "accuracy", 0.0, seed=0) for s in a + b]
    t = arm_difference(scores, a + b, "accuracy", "A", "B", cfg=CFG, lang=["fr", "de"])
    assert t.effect == pytest.approx(1 - 16 / 40) and t.n == 80 and t.low > 0
    assert claim_from_test("A beats B", +1, t).verdict == "holds"
    p = arm_difference(scores, a + b, "accuracy", "A", "B", cfg=CFG, test="permutation")
    assert p.p_value < 0.01 and math.isnan(p.low)


def test_no_evidence_gives_no_interval() -> None:
    scores = [Score("A", "fr", "accuracy", 0.5), Score("B", "fr", "accuracy", 0.4)]
    t = arm_difference(scores, [], "accuracy", "A", "B")
    assert t.effect == pytest.approx(0.1) and math.isnan(t.low)
    assert claim_from_test("A beats B", +1, t).verdict == "inconclusive"


def test_arm_score_and_baselines_from_items() -> None:
    gold = [0, 0, 0, 1, 2] * 8
    sets = [labels("A", "fr", gold, gold), labels("A", "de", [0] * 40, gold)]
    iv = arm_score([], sets, "accuracy", "A", cfg=CFG)
    assert iv.estimate == pytest.approx((1.0 + 0.6) / 2) and iv.n == 80 and iv.has_spread
    base = item_baselines(sets)
    assert base.majority("accuracy") == pytest.approx(0.6) and base.n_labels == 3
    rec = [Score("B", "fr", "accuracy", 0.5, ci_low=0.4, ci_high=0.6, n=50)]
    assert arm_score(rec, [], "accuracy", "B").half_width == pytest.approx(0.1)


def _seeded(model: str, lang: str, seed: int, ids: list[str], right: int) -> ItemSet:
    """Labels on ``ids``, the first ``right`` answered correctly, tagged with ``seed``."""
    gold = [i % 3 for i in range(len(ids))]
    pred = [g if i < right else (g + 1) % 3 for i, g in enumerate(gold)]
    return replace(labels(model, lang, pred, gold), ids=list(ids), seed=seed)


def test_seeds_on_different_test_samples_are_pooled_as_a_nested_design() -> None:
    """Issue 29: a stage that samples its test verses with the run's seed gives each seed
    its own items (even a different count); the pooled test resamples each seed's items on
    its own instead of refusing them, and says so."""
    own = {0: [f"v{i}" for i in range(40)], 1: [f"w{i}" for i in range(38)]}
    sets = [
        _seeded(m, "fr", k, ids, right)
        for k, ids in own.items()
        for m, right in (("A", 30 + k), ("B", 20))
    ]
    scores = [
        Score(s.model, "fr", "accuracy", s.statistic("accuracy").value(), seed=s.seed) for s in sets
    ]
    t = arm_difference(scores, sets, "accuracy", "A", "B", cfg=CFG)
    assert t.effect == pytest.approx(((30 - 20) / 40 + (31 - 20) / 38) / 2)
    assert "resampled per seed" in t.method and "2 training seeds" in t.method
    iv = arm_score(scores, sets, "accuracy", "A", cfg=CFG)
    assert "resampled per seed" in iv.method and iv.low < iv.estimate < iv.high
    # the same items in every seed: the crossed design, one item resample for both seeds
    same = [
        _seeded(m, "fr", k, own[0], right)
        for k in (0, 1)
        for m, right in (("A", 30 + k), ("B", 20))
    ]
    t2 = arm_difference(scores, same, "accuracy", "A", "B", cfg=CFG)
    assert "shared by the seeds" in t2.method


def test_across_seeds_keeps_the_first_seeds_order_and_names_the_design() -> None:
    a0, b0 = _seeded("A", "fr", 0, ["x", "y"], 1), _seeded("A", "de", 0, ["x", "y"], 1)
    a1, b1 = _seeded("A", "de", 1, ["x", "y"], 2), _seeded("A", "fr", 1, ["x", "y"], 2)
    strata, shared = across_seeds([[(a0,), (b0,)], [(a1,), (b1,)]])
    assert shared and [[t[0].lang for t in s] for s in strata] == [["fr", "de"], ["fr", "de"]]
    swapped = _seeded("A", "de", 1, ["y", "x"], 2)  # the same items in another order
    strata, shared = across_seeds([[(a0,), (b0,)], [(swapped,), (b1,)]])
    assert shared and strata[1][1][0].ids == ["x", "y"]
    assert strata[1][1][0].columns["pred"] == list(reversed(swapped.columns["pred"]))
    # one differing id: the common item stays crossed, each seed's other item is its own
    c1 = _seeded("A", "de", 1, ["z", "x"], 2)
    strata, shared = across_seeds([[(a0,), (b0,)], [(c1,), (b1,)]])
    assert shared == [2, 1] and strata[1][1][0].ids == ["x", "z"]
    assert strata[1][0][0].ids == ["x", "y"]
    d1 = _seeded("A", "de", 1, ["v", "w"], 2)
    assert across_seeds([[(b0,)], [(d1,)]])[1] is False
    with pytest.raises(DataError, match="different languages"):
        across_seeds([[(a0,), (b0,)], [(a1,)]])
