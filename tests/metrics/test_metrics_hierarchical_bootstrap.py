"""Seeds and items together: hand-checkable cases of the item + seed variance components
(item bootstrap variance plus s^2 / k, Student t at Welch-Satterthwaite degrees of freedom)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.hierarchical import hierarchical_bootstrap_ci, paired_hierarchical_bootstrap
from polymnesia.metrics.uncertainty import (
    bootstrap_ci,
    mean_statistic,
    resample_indices,
    stratified_bootstrap_ci,
)

T2 = 4.302652729911275  # t_{2, 0.975}


def _bern(p: float, n: int = 200, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return mean_statistic((rng.random(n) < p).astype(float))


def test_one_seed_is_the_item_bootstrap_and_says_so() -> None:
    s = _bern(0.3)
    one = hierarchical_bootstrap_ci([s], n_resamples=500, seed=3)
    ref = stratified_bootstrap_ci([s], n_resamples=500, seed=3)
    assert (one.estimate, one.low, one.high) == (ref.estimate, ref.low, ref.high)
    assert one.method.startswith("one seed")


def test_three_seeds_without_item_noise_give_the_t_interval_over_seeds() -> None:
    # every item of a seed scores the same, so item resamples cannot move a seed's mean:
    # the interval is mean ± t_{2, 0.975} s / sqrt(3) with s the sd of (0.2, 0.5, 0.6)
    seeds = [mean_statistic(np.full(40, v)) for v in (0.2, 0.5, 0.6)]
    iv = hierarchical_bootstrap_ci(seeds, n_resamples=300, seed=0)
    s = float(np.std([0.2, 0.5, 0.6], ddof=1))  # 0.2081666
    half = T2 * s / math.sqrt(3)  # 0.51711
    assert iv.estimate == pytest.approx(13 / 30)
    assert iv.low == pytest.approx(13 / 30 - half) and iv.high == pytest.approx(13 / 30 + half)
    assert iv.high - iv.low == pytest.approx(1.03423, abs=1e-5)
    assert iv.method == (
        "seeds and items: t over 3 training seeds (2.0 df) and bootstrap over 40 items "
        "(shared by the seeds; 300 resamples)"
    )


def test_seed_interval_reaches_past_the_seed_values() -> None:
    # a percentile bootstrap over 3 seeds stays within [0.2, 0.6]; the t-interval does not
    seeds = [mean_statistic(np.full(40, v)) for v in (0.2, 0.5, 0.6)]
    iv = hierarchical_bootstrap_ci(seeds, n_resamples=300)
    assert iv.low < 0.2 and iv.high > 0.6


def test_identical_seeds_give_the_item_bootstrap_with_the_items_t_quantile() -> None:
    # no seed spread and no interaction: SE is the sd of the item replicates and the interval
    # is estimate ± t_{299} SE (the item mean square's n - 1 df), close to the percentile
    # interval of the same replicates
    s = _bern(0.3, n=300)
    iv = hierarchical_bootstrap_ci([s, s, s], n_resamples=4000, seed=0)
    reps = s.replicates(resample_indices(np.random.default_rng(0), s.n, 4000))
    se = float(np.std(reps, ddof=1))
    assert iv.estimate == pytest.approx(s.value())
    assert iv.high - iv.estimate == pytest.approx(stats.t.ppf(0.975, 299) * se, rel=1e-9)
    one = bootstrap_ci(s, n_resamples=4000, seed=0)
    assert iv.high - iv.low == pytest.approx(one.high - one.low, rel=0.1)
    assert "(no seed spread)" in iv.method


def test_satterthwaite_df_by_hand() -> None:
    # two item values per seed (0 and 2d) shared by the seeds, seed offsets (0, 0.1, 0.2)
    d = np.array([0.0, 0.2])
    seeds = [mean_statistic(d + off) for off in (0.0, 0.1, 0.2)]
    iv = hierarchical_bootstrap_ci(seeds, n_resamples=2000, seed=5)
    reps = seeds[0].replicates(resample_indices(np.random.default_rng(5), 2, 2000))
    var_items = float(np.var(reps, ddof=1))  # the offsets do not move with the items
    var_seeds = 0.01 / 3  # s^2 = 0.01
    # every seed moves alike with the items: no interaction, the item part is all shared.
    # df: Satterthwaite with the seed term counted twice (k - 1 = 2 df) and the item mean
    # square at n - 1 = 1 df
    a = 2 * var_seeds
    df = (a + var_items) ** 2 / (a**2 / 2 + var_items**2 / 1)
    half = stats.t.ppf(0.975, df) * math.sqrt(var_items + var_seeds)
    assert iv.high - iv.estimate == pytest.approx(half, rel=1e-9)
    assert f"({df:.1f} df)" in iv.method and df >= 2


def test_strata_per_seed_average_languages_first() -> None:
    per_seed = [
        [mean_statistic(np.full(10, a)), mean_statistic(np.full(30, b))]
        for a, b in ((0.2, 0.4), (0.2, 0.4))
    ]
    iv = hierarchical_bootstrap_ci(per_seed, n_resamples=200)
    assert iv.estimate == pytest.approx(0.3) and iv.low == pytest.approx(0.3)
    assert iv.high == pytest.approx(0.3) and iv.n == 40


def test_paired_differences_by_hand() -> None:
    a = [_bern(p, seed=i) for i, p in enumerate((0.4, 0.6, 0.5))]
    same = paired_hierarchical_bootstrap(a, a, n_resamples=300)
    assert (same.effect, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    shifted = [mean_statistic(s.columns[:, 0] + 0.1) for s in a]
    t = paired_hierarchical_bootstrap(shifted, a, n_resamples=300)
    assert t.effect == pytest.approx(0.1) and t.low == pytest.approx(0.1)
    assert t.high == pytest.approx(0.1) and t.p_value == 0.0
    # per-seed differences 0.1, 0.3, 0.2 with no item noise: the paired t-test over seeds
    b = [mean_statistic(np.full(20, 0.0))] * 3
    x = [mean_statistic(np.full(20, v)) for v in (0.1, 0.3, 0.2)]
    t = paired_hierarchical_bootstrap(x, b, n_resamples=200)
    se = 0.1 / math.sqrt(3)
    assert t.effect == pytest.approx(0.2)
    assert t.low == pytest.approx(0.2 - T2 * se) and t.high == pytest.approx(0.2 + T2 * se)
    assert t.p_value == pytest.approx(2 * stats.t.sf(0.2 / se, 2))  # 0.0377
    assert t.p_value == pytest.approx(stats.ttest_rel([0.1, 0.3, 0.2], [0, 0, 0]).pvalue)
    assert t.method.startswith("paired seeds and items: t over 3 training seeds (2.0 df)")


def test_mismatched_seeds_or_items_are_refused() -> None:
    with pytest.raises(PolymnesiaError, match="same items"):
        hierarchical_bootstrap_ci([_bern(0.5, n=10), _bern(0.5, n=12)])
    with pytest.raises(PolymnesiaError, match="paired seeds and items must match"):
        paired_hierarchical_bootstrap([_bern(0.5), _bern(0.5)], [_bern(0.5)])


def test_seeds_on_one_test_set_keep_the_item_spread() -> None:
    # three seeds with the very same item scores: no seed variance, so the interval of their
    # mean is the item bootstrap's. Read as nested (seeds with test sets of their own) the
    # seed spread is the whole variance; three seeds that tie exactly have s^2 = 0, read as
    # chi2_{2, 0.025} / 2 of the seeds' own item variance of the mean (var / 3), at 2 df
    s = _bern(0.3, n=300)
    one = bootstrap_ci(s, n_resamples=4000, seed=0)
    crossed = hierarchical_bootstrap_ci([s, s, s], n_resamples=4000, seed=0)
    nested = hierarchical_bootstrap_ci([s, s, s], n_resamples=4000, seed=0, shared_items=False)
    width = one.high - one.low
    assert crossed.high - crossed.low == pytest.approx(width, rel=0.1)
    floor = T2 * math.sqrt(stats.chi2.ppf(0.025, 2) / 2 / 3) / stats.norm.ppf(0.975)
    assert nested.high - nested.low == pytest.approx(width * floor, rel=0.15)  # 0.2 x width
    assert "shared by the seeds" in crossed.method
    assert "resampled per seed" in nested.method


def test_one_differing_item_keeps_the_rest_crossed() -> None:
    # 3 seeds on 200 shared items whose difficulty dominates (item sd 0.3, seed x item noise
    # 0.05); seed 2 has item 199 replaced. Matching by id keeps 199 items crossed: the
    # interval is the crossed one, not the nested one that drops the shared item variance
    rng = np.random.default_rng(4)
    hard = rng.normal(0.5, 0.3, 200)
    cols = [hard + rng.normal(0, 0.05, 200) + off for off in (0.0, 0.01, -0.01)]
    crossed = hierarchical_bootstrap_ci([mean_statistic(c) for c in cols], seed=1)
    swapped = cols[2].copy()
    swapped[199] = rng.normal(0.5, 0.3)
    seeds = [mean_statistic(c) for c in (cols[0], cols[1], swapped)]
    partial = hierarchical_bootstrap_ci(seeds, seed=1, shared_items=[199])
    nested = hierarchical_bootstrap_ci(seeds, seed=1, shared_items=False)
    width = crossed.high - crossed.low
    assert partial.high - partial.low == pytest.approx(width, rel=0.1)
    assert nested.high - nested.low < 0.5 * width
    assert "199 shared by the seeds, the rest resampled per seed" in partial.method
    with pytest.raises(PolymnesiaError, match=r"shared item counts \[201\] do not fit"):
        hierarchical_bootstrap_ci(seeds, shared_items=[201])
