"""Bootstrap intervals, paired tests and seed intervals on hand-checkable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.classification import accuracy, macro_f1
from polymnesia.metrics.lm import bits_per_byte
from polymnesia.metrics.seed_tests import combine_independent, paired_seed_test, seed_interval
from polymnesia.metrics.uncertainty import (
    Interval,
    accuracy_statistic,
    bootstrap_ci,
    macro_f1_statistic,
    mean_statistic,
    paired_bootstrap,
    paired_permutation_test,
    percentile_interval,
    ratio_statistic,
    stratified_bootstrap_ci,
    sum_statistic,
)


def test_statistics_reproduce_the_reported_metrics() -> None:
    rng = np.random.default_rng(1)
    pred, gold = rng.integers(0, 4, 50), rng.integers(0, 4, 50)
    assert accuracy_statistic(pred, gold).value() == pytest.approx(accuracy(pred, gold))
    assert macro_f1_statistic(pred, gold, 5).value() == pytest.approx(macro_f1(pred, gold, 5))
    assert macro_f1_statistic(pred, gold).value() == pytest.approx(macro_f1(pred, gold))
    nll, nbytes = [3.0, 5.0, 8.0], [4, 4, 8]
    bpb = ratio_statistic(nll, nbytes, scale=1 / math.log(2))
    assert bpb.value() == pytest.approx(bits_per_byte(16.0, 16))  # a ratio of sums, not a mean
    ppl = ratio_statistic([2.0, 4.0], [1, 2], exp=True)
    assert ppl.value() == pytest.approx(math.exp(2.0))
    f1 = sum_statistic([[1, 2, 1], [0, 1, 1]], lambda s: 2 * s[:, 0] / (s[:, 1] + s[:, 2]), "f1")
    assert f1.value() == pytest.approx(2 * 1 / (3 + 2))


def test_bootstrap_of_constant_items_has_no_width() -> None:
    iv = bootstrap_ci(mean_statistic([0.7] * 20), n_resamples=200, seed=3)
    assert (iv.estimate, iv.low, iv.high, iv.n) == pytest.approx((0.7, 0.7, 0.7, 20))


def test_bootstrap_of_two_items_by_hand() -> None:
    # means of resamples of {0, 1}: 0 (p=1/4), 0.5 (1/2), 1 (1/4): the 95% interval is [0, 1]
    iv = bootstrap_ci(mean_statistic([0.0, 1.0]), n_resamples=4000, seed=0)
    assert (iv.low, iv.high) == (0.0, 1.0)
    # a 20% interval spans the 40% and 60% quantiles, both on the middle value 0.5
    assert bootstrap_ci(mean_statistic([0.0, 1.0]), level=0.2, n_resamples=4000).low == 0.5


def test_bootstrap_width_matches_binomial_standard_error() -> None:
    correct = np.array([1.0] * 200 + [0.0] * 200)
    iv = bootstrap_ci(mean_statistic(correct), n_resamples=2000, seed=0)
    expected = 1.96 * math.sqrt(0.25 / 400)  # 0.049
    assert iv.half_width == pytest.approx(expected, rel=0.1)
    assert iv.excludes(0.4) and not iv.excludes(0.5)


def test_bootstrap_is_seeded() -> None:
    stat = mean_statistic(np.random.default_rng(0).random(30))
    assert bootstrap_ci(stat, seed=5) == bootstrap_ci(stat, seed=5)
    assert bootstrap_ci(stat, seed=5) != bootstrap_ci(stat, seed=6)


def test_ratio_bootstrap_resamples_whole_items() -> None:
    # every item has nll = 2 * bytes: any resample's ratio is exactly 2
    iv = bootstrap_ci(ratio_statistic([2.0, 20.0, 8.0], [1, 10, 4]), n_resamples=300)
    assert (iv.low, iv.high) == pytest.approx((2.0, 2.0))


def test_stratified_mean_is_unweighted_over_strata() -> None:
    a, b = mean_statistic([1.0, 1.0, 1.0]), mean_statistic([0.0])
    iv = stratified_bootstrap_ci([a, b], n_resamples=100)
    assert (iv.estimate, iv.low, iv.high, iv.n) == pytest.approx((0.5, 0.5, 0.5, 4))


def test_stratified_width_shrinks_like_independent_means() -> None:
    strata = [mean_statistic(np.array([1.0] * 100 + [0.0] * 100)) for _ in range(4)]
    one = bootstrap_ci(strata[0], n_resamples=2000).half_width
    four = stratified_bootstrap_ci(strata, n_resamples=2000).half_width
    assert four == pytest.approx(one / 2, rel=0.15)  # sd of a mean of 4 independent means


def test_paired_bootstrap_identical_and_shifted_arms() -> None:
    x = mean_statistic([0.2, 0.5, 0.9, 0.4])
    same = paired_bootstrap(x, x, n_resamples=200)
    assert (same.effect, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    up = paired_bootstrap(mean_statistic([1.2, 1.5, 1.9, 1.4]), x, n_resamples=200)
    assert (up.effect, up.low, up.high, up.p_value) == pytest.approx((1.0, 1.0, 1.0, 0.0))
    assert up.n == 4 and "paired bootstrap" in up.method


def test_paired_bootstrap_pairs_items() -> None:
    # arm a beats b by one item in 50, items vary a lot: unpaired intervals would overlap,
    # the paired difference is always >= 0
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, 50).astype(float)
    a = b.copy()
    a[np.argmin(b)] = 1.0
    t = paired_bootstrap(mean_statistic(a), mean_statistic(b), n_resamples=1000)
    assert t.effect == pytest.approx(0.02) and t.low >= 0.0


def test_paired_permutation_by_hand() -> None:
    # two items, a - b = +1 on each: sign flips give d* in {-1, 0, 0, 1}, P(|d*| >= 1) = 1/2
    t = paired_permutation_test(
        mean_statistic([1.0, 1.0]), mean_statistic([0.0, 0.0]), n_resamples=4000
    )
    assert t.p_value == pytest.approx(0.5, abs=0.03)
    assert math.isnan(t.low) and math.isnan(t.high)
    # 20 items all won by a: only the all-kept or all-swapped permutations reach |d| = 1
    big = paired_permutation_test(
        accuracy_statistic([1] * 20, [1] * 20),
        accuracy_statistic([0] * 20, [1] * 20),
        n_resamples=999,
    )
    assert big.effect == 1.0 and big.p_value == pytest.approx(1 / 1000)


def test_paired_tests_need_the_same_items() -> None:
    with pytest.raises(PolymnesiaError, match="same items"):
        paired_bootstrap(mean_statistic([1.0, 2.0]), mean_statistic([1.0]))


def test_seed_interval_by_hand() -> None:
    iv = seed_interval([1.0, 2.0, 3.0])
    half = 4.302653 / math.sqrt(3)  # t_{0.975, 2} * s / sqrt(k), s = 1
    assert (iv.estimate, iv.low, iv.high, iv.n) == pytest.approx((2.0, 2 - half, 2 + half, 3))
    one = seed_interval([0.4])
    assert one.estimate == 0.4 and not one.has_spread and not one.excludes(0.0)


def test_paired_seed_test() -> None:
    t = paired_seed_test([1.0, 2.0, 4.0], [0.0, 1.0, 2.0])  # differences 1, 1, 2
    iv = seed_interval([1.0, 1.0, 2.0])
    assert (t.effect, t.low, t.high) == pytest.approx((iv.estimate, iv.low, iv.high))
    assert 0 < t.p_value < 0.1
    assert math.isnan(paired_seed_test([1.0], [0.0]).p_value)


def test_combine_independent_intervals() -> None:
    z = 1.959964
    a = Interval(1.0, 1.0 - z, 1.0 + z, 10)  # se 1
    b = Interval(3.0, 3.0 - z, 3.0 + z, 10)
    c = combine_independent([a, b])
    assert c.estimate == 2.0 and c.n == 20
    assert c.half_width == pytest.approx(z * math.sqrt(2) / 2, rel=1e-5)
    assert not combine_independent([a, Interval(1.0, math.nan, math.nan, 1)]).has_spread


def test_percentile_interval_and_bad_input() -> None:
    assert percentile_interval(np.arange(101), 0.9) == pytest.approx((5.0, 95.0))
    with pytest.raises(PolymnesiaError, match="level"):
        bootstrap_ci(mean_statistic([1.0]), level=1.5)
    with pytest.raises(PolymnesiaError, match="non-empty"):
        mean_statistic([])
    with pytest.raises(PolymnesiaError, match="denominators"):
        ratio_statistic([1.0], [0])
