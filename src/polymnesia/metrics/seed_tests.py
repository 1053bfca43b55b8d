"""Intervals and tests over training seeds' values: a Student-t interval over seeds
(:func:`seed_interval`), the paired t-test over seeds (:func:`paired_seed_test`), Welch's
test between two groups of units with its exact-permutation floor (:func:`group_test`,
:func:`smallest_permutation_p`), and independent intervals combined (:func:`combine_independent`).
The types are :mod:`polymnesia.metrics.uncertainty`'s."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import paired_ttest
from polymnesia.metrics.uncertainty import (
    DEFAULT_LEVEL,
    Interval,
    PairedTest,
    as_column,
    check_resampling,
)


def seed_interval(values: npt.ArrayLike, level: float = DEFAULT_LEVEL) -> Interval:
    """Mean over seeds with the Student-t interval ``mean ± t_{(1+level)/2, k-1} s / sqrt(k)``.

    ``s`` is the sample standard deviation (ddof = 1). With one seed there is
    no spread: ``low``/``high`` are NaN.
    """
    check_resampling(1, level)
    x = as_column(values, "seed values")
    k, m = x.size, float(np.mean(x))
    if k < 2:
        return Interval(m, math.nan, math.nan, k, level, "one seed: no spread")
    half = float(stats.t.ppf((1 + level) / 2, k - 1) * np.std(x, ddof=1) / math.sqrt(k))
    return Interval(m, m - half, m + half, k, level, f"t-interval over {k} seeds", df=k - 1)


def paired_seed_test(
    a: npt.ArrayLike, b: npt.ArrayLike, level: float = DEFAULT_LEVEL
) -> PairedTest:
    """Paired t-test over seeds of ``a - b`` (same seed ``k`` in both), with its t-interval.

    p from :func:`polymnesia.metrics.stats.paired_ttest`; the interval is
    :func:`seed_interval` of the per-seed differences.
    """

    x, y = as_column(a, "arm a seeds"), as_column(b, "arm b seeds")
    if x.shape != y.shape:
        raise PolymnesiaError(f"paired seeds differ in number: {x.size} vs {y.size}")
    iv = seed_interval(x - y, level)
    if x.size < 2:
        return PairedTest(iv.estimate, math.nan, math.nan, math.nan, 1, "one seed: no test", level)
    _, p = paired_ttest(x, y)
    method = f"paired t-test over {x.size} seeds"
    return PairedTest(iv.estimate, iv.low, iv.high, p, x.size, method, level, df=x.size - 1)


def smallest_permutation_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact permutation test of two groups of ``n_a`` and ``n_b``
    units can give: ``2 / C(n_a + n_b, n_a)`` (capped at 1). With 3 and 3 units it is 0.1, so
    no test over those units, whatever its statistic, is distribution-free significant at
    0.05."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a))


def group_test(a: npt.ArrayLike, b: npt.ArrayLike, level: float = DEFAULT_LEVEL) -> PairedTest:
    """``mean(a) - mean(b)`` over two independent groups of units (languages, say), with the
    Welch t-interval and the p of the same t at the Welch-Satterthwaite df: the unit is the
    sample, so the inference is about the population the units stand for, not these units.
    Fewer than two units in a group: no interval (NaN)."""
    x, y = as_column(a, "group a units"), as_column(b, "group b units")
    effect = float(np.mean(x) - np.mean(y)) if x.size and y.size else math.nan
    method = f"Welch t-test over units ({x.size} vs {y.size})"
    if x.size < 2 or y.size < 2:
        return PairedTest(effect, math.nan, math.nan, math.nan, x.size + y.size, method, level)
    va, vb = float(np.var(x, ddof=1)) / x.size, float(np.var(y, ddof=1)) / y.size
    se = math.sqrt(va + vb)
    if se == 0:
        p = 1.0 if effect == 0 else 0.0
        return PairedTest(effect, effect, effect, p, x.size + y.size, method, level)
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = float(stats.t.ppf((1 + level) / 2, df)) * se
    p = float(2 * stats.t.sf(abs(effect) / se, df))
    return PairedTest(
        effect, effect - half, effect + half, p, x.size + y.size, method, level, df=df
    )


def combine_independent(intervals: Sequence[Interval], level: float = DEFAULT_LEVEL) -> Interval:
    """Normal-approximation interval of the mean of independent estimates (e.g. languages).

    Each interval's standard error is read back as ``half_width / z`` with
    ``z = Phi^-1((1 + level_i) / 2)``; the mean's is ``sqrt(sum se_i^2) / L``.
    A fallback for group means when only per-language intervals are stored
    (no items); :func:`stratified_bootstrap_ci` is preferred when items exist.
    Without a spread in any input there is none in the output.
    """
    if not intervals:
        raise PolymnesiaError("need at least one interval to combine")
    est = float(np.mean([iv.estimate for iv in intervals]))
    n = sum(iv.n for iv in intervals)
    if not all(iv.has_spread for iv in intervals):
        return Interval(est, math.nan, math.nan, n, level, "no spread in some inputs")
    se = [iv.half_width / stats.norm.ppf((1 + iv.level) / 2) for iv in intervals]
    half = float(stats.norm.ppf((1 + level) / 2) * math.sqrt(sum(s * s for s in se)) / len(se))
    method = f"normal approximation from {len(intervals)} independent intervals"
    return Interval(est, est - half, est + half, n, level, method)
