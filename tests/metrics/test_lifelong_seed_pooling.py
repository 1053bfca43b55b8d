"""Pooling item replicates made elsewhere over training seeds (lifelong's seeds x items):
:func:`seed_item_interval` and :func:`paired_seed_item_test` on hand-checkable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.seed_items import paired_seed_item_test, seed_item_interval, seed_item_se

T2 = 4.302652729911275  # t_{2, 0.975}


def test_no_item_noise_gives_the_t_interval_over_seeds() -> None:
    points = [0.5, 0.6, 0.7]
    reps = np.tile(np.array(points)[:, None], (1, 100))  # items cannot move any seed
    iv = seed_item_interval(points, reps, n=120)
    assert iv.estimate == pytest.approx(0.6)
    assert iv.high - iv.estimate == pytest.approx(T2 * 0.1 / math.sqrt(3))  # 0.2484
    assert iv.n == 120 and "t over 3 training seeds (2.0 df)" in iv.method


def test_no_seed_spread_gives_the_item_spread_with_the_items_t_quantile() -> None:
    # three seeds that score the shared items alike: no seed part and no interaction, so the
    # interval is the item spread with t at the item mean square's n - 1 = 79 df
    rng = np.random.default_rng(3)
    row = rng.normal(0.5, 0.02, size=400)
    reps = np.tile(row, (3, 1))
    iv = seed_item_interval([0.5, 0.5, 0.5], reps, n=80)
    half = stats.t.ppf(0.975, 79) * row.std(ddof=1)  # 1.9905 sd
    assert iv.high - iv.estimate == pytest.approx(half, rel=1e-6)
    assert "(no seed spread)" in iv.method


def test_crossed_design_averages_columns_before_the_variance() -> None:
    # seed 1's replicates are seed 0's mirrored around 0.5: on a shared item resample the two
    # cancel, so the mean over seeds has no item variance; drawn per seed they would not
    row = np.array([0.4, 0.6, 0.45, 0.55])
    reps = np.stack([row, 1 - row])
    se = seed_item_se([0.5, 0.5], reps)
    assert se.var_items == pytest.approx(0.0) and se.var_seeds == 0.0
    nested = seed_item_se([0.5, 0.5], reps, shared_items=False)
    assert nested.var_items == pytest.approx(2 * float(np.var(row, ddof=1)) / 4)
    # nested: every bit of item variance is each seed's own, none of it is added to s^2 / k
    assert nested.var_within == pytest.approx(nested.var_items)


def test_the_interaction_is_counted_once_by_hand() -> None:
    # replicates of 3 seeds: a part r every seed shares, +e / -e / 0 for seeds 0, 1, 2 (r and
    # e orthogonal, each of variance 0.02 / 3 over the 4 replicates)
    r, e = np.array([-0.1, 0.1, 0.0, 0.0]), np.array([0.0, 0.0, 0.1, -0.1])
    reps = np.stack([r + e, r - e, r])
    se = seed_item_se([0.0, 0.2, 0.4], reps)
    # C = [[4, 0, 2], [0, 4, 2], [2, 2, 2]] / 300: the mean over seeds moves with r alone
    assert se.var_items == pytest.approx(0.02 / 3)
    # (mean C_ss - mean C_st) / k = (10/3 - 4/3) / 3 / 300: the seeds' own item noise
    assert se.var_within == pytest.approx(0.02 / 9)
    assert se.var_seeds == pytest.approx(0.04 / 3)  # s^2 = 0.04
    # se^2 = s^2 / k + (var_items - var_within), the shared part = the mean covariance 4/900
    assert se.se**2 == pytest.approx(0.04 / 3 + 0.04 / 9)
    # Satterthwaite with the seed term counted twice: 2 (2 A + G)^2 / (2 A)^2 = 2 (7/6)^2
    assert se.df == pytest.approx(49 / 18)
    # the same replicates read as nested: no shared part, the t-interval over the seeds
    nested = seed_item_se([0.0, 0.2, 0.4], reps, shared_items=False)
    assert nested.se**2 == pytest.approx(0.04 / 3) and nested.df == pytest.approx(2.0)


def test_seeds_that_tie_keep_a_floor_from_their_items() -> None:
    # nested seeds with equal scores: s^2 = 0 is read as chi2_{2, 0.025} / 2 of var_within
    reps = np.array([[0.4, 0.6, 0.5, 0.5], [0.5, 0.5, 0.3, 0.7]])
    se = seed_item_se([0.5, 0.5], reps, shared_items=False)
    within = (0.02 / 3 + 0.08 / 3) / 4
    assert se.var_within == pytest.approx(within)
    assert se.se**2 == pytest.approx(stats.chi2.ppf(0.025, 1) * within)


def test_paired_test_of_per_seed_differences() -> None:
    d = [0.1, 0.3, 0.2]
    t = paired_seed_item_test(d, np.tile(np.array(d)[:, None], (1, 50)), n=60)
    se = 0.1 / math.sqrt(3)
    assert t.effect == pytest.approx(0.2) and t.low == pytest.approx(0.2 - T2 * se)
    assert t.p_value == pytest.approx(2 * stats.t.sf(0.2 / se, 2))
    assert t.method.startswith("paired seeds and items") and t.n_resamples == 50
    zero = paired_seed_item_test([0.0, 0.0], np.zeros((2, 10)), n=5)
    assert (zero.low, zero.high, zero.p_value) == (0.0, 0.0, 1.0)
    same = paired_seed_item_test([0.1, 0.1], np.full((2, 10), 0.1), n=5)
    assert (same.low, same.high, same.p_value) == (0.1, 0.1, 0.0)


def test_bad_shapes_are_refused_in_one_line() -> None:
    with pytest.raises(PolymnesiaError, match="at least 2 seeds"):
        seed_item_se([0.5], np.zeros((1, 5)))
    with pytest.raises(PolymnesiaError, match=r"must be \[3, B\]"):
        seed_item_se([0.5, 0.5, 0.5], np.zeros((2, 5)))
    with pytest.raises(PolymnesiaError, match=r"must be \[2, B\] \(seeds x resamples"):
        seed_item_se([0.5, 0.5], np.zeros(5))  # replicates of the mean alone
