"""Pooling item replicates made elsewhere over training seeds (lifelong's seeds x items):
:func:`seed_item_interval` and :func:`paired_seed_item_test` on hand-checkable inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import (
    paired_seed_item_test,
    seed_item_interval,
    seed_item_se,
)

T2 = 4.302652729911275  # t_{2, 0.975}


def test_no_item_noise_gives_the_t_interval_over_seeds() -> None:
    points = [0.5, 0.6, 0.7]
    reps = np.tile(np.array(points)[:, None], (1, 100))  # items cannot move any seed
    iv = seed_item_interval(points, reps, n=120)
    assert iv.estimate == pytest.approx(0.6)
    assert iv.high - iv.estimate == pytest.approx(T2 * 0.1 / math.sqrt(3))  # 0.2484
    assert iv.n == 120 and "t over 3 training seeds (2.0 df)" in iv.method


def test_no_seed_spread_gives_the_item_spread_with_a_normal_quantile() -> None:
    rng = np.random.default_rng(3)
    row = rng.normal(0.5, 0.02, size=400)
    reps = np.tile(row, (3, 1))  # three seeds that score the shared items alike
    iv = seed_item_interval([0.5, 0.5, 0.5], reps, n=80)
    assert iv.high - iv.estimate == pytest.approx(1.959964 * row.std(ddof=1), rel=1e-6)
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


def test_satterthwaite_df_and_the_replicates_of_the_mean() -> None:
    se = seed_item_se([0.0, 0.2, 0.4], np.array([0.1, 0.3, 0.2, 0.2]))  # [B] of the mean
    var_items, var_seeds = 0.02 / 3, 0.04 / 3
    assert se.var_items == pytest.approx(var_items) and se.var_seeds == pytest.approx(var_seeds)
    assert se.df == pytest.approx((var_items + var_seeds) ** 2 / (var_seeds**2 / 2))  # 4.5
    assert se.df == pytest.approx(4.5)


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
    with pytest.raises(PolymnesiaError, match=r"must be \[B\] or \[3, B\]"):
        seed_item_se([0.5, 0.5, 0.5], np.zeros((2, 5)))
    with pytest.raises(PolymnesiaError, match="nested item resamples"):
        seed_item_se([0.5, 0.5], np.zeros(5), shared_items=False)
