"""Tests over units (languages): Welch's t against SciPy, the exact permutation floor by hand."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from polymnesia.metrics.seed_tests import group_test, smallest_permutation_p


def test_welch_over_units_matches_scipy() -> None:
    a, b = [0.1, 0.3, 0.2, 0.5], [0.0, 0.05, 0.1]
    got = group_test(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert got.effect == pytest.approx(0.225)
    assert got.p_value == pytest.approx(ref.pvalue)
    assert (got.low, got.high) == pytest.approx(tuple(ref.confidence_interval()))
    assert got.n == 7 and got.df == pytest.approx(3.6533, abs=1e-4)


def test_one_unit_in_a_group_gives_no_interval() -> None:
    got = group_test([0.4], [0.1, 0.2])
    assert got.effect == pytest.approx(0.25) and math.isnan(got.low) and math.isnan(got.p_value)


def test_smallest_exact_permutation_p() -> None:
    # 2 / C(6, 3) = 2 / 20; 2 / C(8, 4) = 2 / 70; 2 / C(3, 1) capped at 1 stays 2/3
    assert smallest_permutation_p(3, 3) == pytest.approx(0.1)
    assert smallest_permutation_p(4, 4) == pytest.approx(2 / 70)
    assert smallest_permutation_p(2, 1) == pytest.approx(2 / 3)
    assert smallest_permutation_p(1, 1) == 1.0 and smallest_permutation_p(0, 5) == 1.0
