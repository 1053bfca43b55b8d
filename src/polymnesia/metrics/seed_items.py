"""A mean over ``k`` training seeds whose variance counts the seeds and the test items.

Its variance is estimated as in a two-way random-effects ANOVA by moments
(:class:`SeedItemSE`): ``s^2 / k`` over the seeds plus the item variance the seeds share,
taken from the covariances of the seeds' item replicates (one resample of the shared items
read by every seed), so the seed x item interaction is counted once; a Student t quantile
at Satterthwaite degrees of freedom (Satterthwaite 1946, "An Approximate Distribution of
Estimates of Variance Components", Biometrics Bulletin 2(6)) with the seed term counted
twice, so an interval covers both the model's training randomness and the test set at its
level (the coverage simulation of :mod:`polymnesia.metrics.seed_item_coverage`), and with
few seeds it is as wide as a t-interval over them (a percentile bootstrap over 3 seeds
cannot reach past the 3 values). :func:`seed_item_interval` and
:func:`paired_seed_item_test` take replicates made elsewhere;
:mod:`polymnesia.metrics.hierarchical` makes them from item statistics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import (
    DEFAULT_LEVEL,
    Interval,
    ItemStatistic,
    PairedTest,
    as_column,
    check_resampling,
)

PerSeed = Sequence[ItemStatistic | Sequence[ItemStatistic]]


#: which test items the seeds share: ``True`` every item (crossed design), ``False`` none
#: (nested), or per stratum the number of leading items that every seed shares, in one
#: order, each seed's remaining items its own (:func:`polymnesia.items.across_seeds`)
Shared = bool | Sequence[int]


#: how a method string over training seeds and test items begins (report cells look for it)
SEEDS_AND_ITEMS = "seeds and items"


#: the Satterthwaite degrees of freedom count the seed term this many times (see
#: :attr:`SeedItemSE.df`; chosen by the coverage simulation, docs/metrics.md)
DF_SEED_WEIGHT = 2.0


def seed_item_moments(
    points: npt.ArrayLike, cov: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three moments behind :class:`SeedItemSE`, vectorised over leading axes.

    ``points``: ``[..., k]`` per-seed estimates; ``cov``: ``[..., k, k]`` the covariance
    matrix over item resamples of the ``k`` per-seed estimates (a resample of the shared
    items read by every seed, the others drawn per seed). Returns ``(var_seeds, var_items,
    var_within)``: ``s^2 / k``; ``1' C 1 / k^2``, the item variance of the mean over seeds;
    and ``(mean_s C_ss - mean_{s != t} C_st) / k``, the part of it that is not shared
    between seeds (the seed x item interaction, and the items a seed scored alone), which
    ``s^2`` holds too.
    """
    x, c = np.asarray(points, dtype=float), np.asarray(cov, dtype=float)
    k = x.shape[-1]
    total = c.sum(axis=(-2, -1))
    trace = np.trace(c, axis1=-2, axis2=-1)
    cross = (total - trace) / (k * (k - 1))
    return x.var(axis=-1, ddof=1) / k, total / k**2, (trace / k - cross) / k


def seed_floor(k: int) -> float:
    """``chi^2_{k-1, 0.025} / (k - 1)``. ``s^2 / k`` is expected to be at least
    ``var_within`` (the seeds' own item noise is in it), and where the seeds add nothing it
    falls below this share of ``var_within`` in 2.5% of draws: a smaller ``s^2 / k`` (seeds
    that tie) is read as this share."""
    return float(stats.chi2.ppf(0.025, k - 1) / (k - 1))


def seed_item_variance(
    k: int, var_seeds: npt.ArrayLike, var_items: npt.ArrayLike, var_within: npt.ArrayLike
) -> np.ndarray:
    """``max(var_seeds, seed_floor(k) var_within) + max(var_items - var_within, 0)``
    (vectorised): the squared standard error of :class:`SeedItemSE`."""
    vs, vi, vw = (np.asarray(v, dtype=float) for v in (var_seeds, var_items, var_within))
    return np.maximum(vs, seed_floor(k) * vw) + np.maximum(vi - vw, 0.0)


def seed_item_df(
    k: int,
    var_seeds: npt.ArrayLike,
    var_items: npt.ArrayLike,
    var_within: npt.ArrayLike,
    df_items: float = math.inf,
) -> np.ndarray:
    """Satterthwaite degrees of freedom of :func:`seed_item_variance` (vectorised), at least
    ``k - 1``; see :attr:`SeedItemSE.df`."""
    vs, vi, vw = (np.asarray(v, dtype=float) for v in (var_seeds, var_items, var_within))
    shared = np.maximum(vi - vw, 0.0)
    a = DF_SEED_WEIGHT * np.maximum(vs, seed_floor(k) * vw)  # the seed mean square, weighted
    # where a shared item part is counted: the item mean square (df_items) less the
    # residual one ((k - 1) df_items)
    den = a**2 / (k - 1) + np.where(
        shared > 0, vi**2 / df_items + vw**2 / ((k - 1) * df_items), 0.0
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(den > 0, (a + shared) ** 2 / np.where(den > 0, den, 1.0), math.inf)
    return np.maximum(df, k - 1)


@dataclass(frozen=True)
class SeedItemSE:
    """The standard error of a mean over ``k`` training seeds, each seed read on test items.

    The per-seed estimates ``x_s`` vary with the training seed and with the test items; the
    variance of their mean has a seed part, an item part shared by the seeds (items every
    seed was scored on: one item's difficulty moves every seed alike), and an item part
    each seed has alone (the seed x item interaction; items only that seed was scored on).
    For a balanced crossed design of item scores ``d[s, i] = delta + a_s + b_i + c_si`` it
    is ``sigma_a^2 / k + sigma_b^2 / n + sigma_c^2 / (k n)``. Three moments estimate it
    (:func:`seed_item_moments`), each of the item ones from the item resamples:

    * ``var_seeds = s^2 / k`` over the ``k`` estimates, expected
      ``sigma_a^2 / k + sigma_c^2 / (k n)`` (``MS_seed / (k n)``);
    * ``var_items``: the item variance of the mean over seeds, expected
      ``sigma_b^2 / n + sigma_c^2 / (k n)`` (``MS_item / (k n)``);
    * ``var_within``: the part of ``var_items`` not shared between seeds, expected
      ``sigma_c^2 / (k n)`` (``MS_resid / (k n)``).

    ``se^2 = max(var_seeds, f var_within) + max(var_items - var_within, 0)``: the two-way
    random-effects ANOVA estimate ``(MS_seed + MS_item - MS_resid) / (k n)``, the
    interaction counted once, with the shared item component ``var_items - var_within``
    (the mean covariance between seeds, ``sigma_b^2 / n``) truncated at 0.
    ``f = chi^2_{k-1, 0.025} / (k - 1)`` (:func:`seed_floor`) only matters for seeds that
    tie. Nested (no shared item): ``var_items == var_within`` and ``se^2 = s^2 / k``, the
    t-interval over the seeds.

    ``df``: Satterthwaite (1946) over the mean squares in ``se^2``, with the seed term counted
    :data:`DF_SEED_WEIGHT` times and a floor of ``k - 1``; ``df_items`` is the item mean
    square's (``n - 1`` for ``n`` items per seed; infinite where unknown). Plain
    Welch-Satterthwaite estimates the df from the same ``k - 1`` df as ``s^2``, so a small
    ``s^2`` both narrows the interval and raises the df, and the interval undercovers where
    seeds dominate (91-93% for 3 seeds); with the weight, every cell of the coverage
    simulation with 200 items covers 93-97% (docs/metrics.md).
    """

    k: int
    var_items: float
    var_seeds: float
    var_within: float = 0.0
    df_items: float = math.inf

    @property
    def variance(self) -> float:
        return float(seed_item_variance(self.k, self.var_seeds, self.var_items, self.var_within))

    @property
    def se(self) -> float:
        v = self.variance
        return math.sqrt(v) if v >= _ZERO_VAR else (math.nan if math.isnan(v) else 0.0)

    @property
    def df(self) -> float:
        if self.var_seeds <= 0 and self.var_within <= 0 and self.var_items <= 0:
            return math.inf
        return float(
            seed_item_df(self.k, self.var_seeds, self.var_items, self.var_within, self.df_items)
        )

    def t(self, level: float) -> float:
        """``t_{df, (1 + level) / 2}`` (the normal quantile for infinite ``df``)."""
        q = (1 + level) / 2
        return float(stats.norm.ppf(q) if math.isinf(self.df) else stats.t.ppf(q, self.df))

    def p_value(self, effect: float) -> float:
        """Two-sided ``2 (1 - T_df(|effect| / se))``; ``se = 0``: 1 for a zero effect, else 0."""
        if self.se == 0:
            return 1.0 if effect == 0 else 0.0
        z = abs(effect) / self.se
        tail = stats.norm.sf(z) if math.isinf(self.df) else stats.t.sf(z, self.df)
        return float(min(1.0, 2 * tail))

    def df_text(self) -> str:
        if self.var_seeds <= 0:
            return "no seed spread"
        if math.isinf(self.df):
            return "infinite df"
        # a seed spread far below the items' gives t at the normal quantile already
        return f"{self.df:.1f} df" if self.df < 1000 else "over 1000 df"


def seed_item_se(
    points: npt.ArrayLike,
    item_replicates: npt.ArrayLike,
    *,
    shared_items: bool = True,
    df_items: float = math.inf,
) -> SeedItemSE:
    """The variance components of a mean over ``k >= 2`` training seeds (:class:`SeedItemSE`).

    ``points``: the ``k`` per-seed estimates (per-seed differences for a paired test).
    ``item_replicates``: ``[k, B]`` per-seed item-bootstrap replicates, replicate ``b`` of
    every seed on the same resample of the items the seeds share (the rest drawn per seed).
    Their covariance matrix over replicates gives the item moments (replicates with a
    non-finite value in some seed left out). ``shared_items=False`` (nested design: no item
    shared, every resample drawn per seed): the covariances between seeds are 0 by design
    and are not estimated. ``df_items``: degrees of freedom of the item part (``n - 1`` for
    ``n`` shared items).
    """
    x = as_column(points, "per-seed estimates")
    k = x.size
    if k < 2:
        raise PolymnesiaError(f"seed and item components need at least 2 seeds, got {k}")
    reps = np.asarray(item_replicates, dtype=float)
    if reps.ndim != 2 or reps.shape[0] != k:
        raise PolymnesiaError(
            f"item replicates must be [{k}, B] (seeds x resamples, replicate b of every seed on "
            f"one item resample), got shape {reps.shape}"
        )
    reps = reps[:, np.all(np.isfinite(reps), axis=0)]
    if reps.shape[1] < 2 or not bool(np.all(np.isfinite(x))):
        return SeedItemSE(k, math.nan, math.nan, math.nan, df_items)
    cov = np.atleast_2d(np.cov(reps, ddof=1))
    cov = np.where(np.abs(cov) < _ZERO_VAR, 0.0, cov)
    if not shared_items:
        cov = np.diag(np.diag(cov))
    var_seeds, var_items, var_within = (float(v) for v in seed_item_moments(x, cov))
    var_seeds = 0.0 if var_seeds < _ZERO_VAR else var_seeds
    return SeedItemSE(k, var_items, var_seeds, var_within, df_items)


#: variances below this are rounding noise of equal values (a standard deviation of 1e-12)
_ZERO_VAR = 1e-24


def _design(shared_items: Shared) -> str:
    if shared_items is True:
        return "shared by the seeds"
    if shared_items is False or not any(shared_items):
        return "resampled per seed"
    return f"{sum(shared_items)} shared by the seeds, the rest resampled per seed"


def seed_item_method(
    se: SeedItemSE, n: int, n_resamples: int, shared_items: Shared = True, units: str = "items"
) -> str:
    """The method string of an interval over seeds and items (begins with ``SEEDS_AND_ITEMS``)."""
    return (
        f"{SEEDS_AND_ITEMS}: t over {se.k} training seeds ({se.df_text()}) and bootstrap over "
        f"{n} {units} ({_design(shared_items)}; {n_resamples} resamples)"
    )


def seed_item_interval(
    points: npt.ArrayLike,
    item_replicates: npt.ArrayLike,
    *,
    n: int,
    level: float = DEFAULT_LEVEL,
    shared_items: Shared = True,
    estimate: float | None = None,
    units: str = "items",
    df_items: float | None = None,
) -> Interval:
    """Interval of a mean over ``k >= 2`` training seeds: ``estimate ± t_{df} se``
    (:func:`seed_item_se`); ``estimate`` defaults to the mean of ``points``. ``n`` counts the
    test items; ``df_items`` defaults to ``n - 1`` (``shared_items`` a list: its sum less
    one). With ``se`` 0 the interval is the point; with an unknown item part (fewer than two
    finite replicates) the bounds are NaN."""
    check_resampling(1, level)
    se = seed_item_se(
        points,
        item_replicates,
        shared_items=_any_shared(shared_items),
        df_items=_df_items(n, shared_items, df_items),
    )
    est = float(np.mean(as_column(points, "per-seed estimates"))) if estimate is None else estimate
    B = np.asarray(item_replicates).shape[-1]
    return _seed_item_interval(se, est, n, B, level, shared_items, units)


def _any_shared(shared_items: Shared) -> bool:
    return shared_items if isinstance(shared_items, bool) else any(shared_items)


def _df_items(n: int, shared_items: Shared, df_items: float | None) -> float:
    if df_items is not None:
        return df_items
    return float(max(n - 1, 1))


def _seed_item_interval(
    se: SeedItemSE, est: float, n: int, B: int, level: float, shared_items: Shared, units: str
) -> Interval:
    half = se.t(level) * se.se
    method = seed_item_method(se, n, B, shared_items, units)
    return Interval(est, est - half, est + half, n, level, method, df=se.df)


def paired_seed_item_test(
    differences: npt.ArrayLike,
    item_replicates: npt.ArrayLike,
    *,
    n: int,
    level: float = DEFAULT_LEVEL,
    shared_items: Shared = True,
    effect: float | None = None,
    units: str = "items",
    df_items: float | None = None,
) -> PairedTest:
    """Paired test of two arms over ``k >= 2`` training seeds (seed ``i`` with seed ``i``).

    ``differences``: the ``k`` per-seed differences ``a_i - b_i``; ``item_replicates``: their
    ``[k, B]`` item-bootstrap replicates, both arms read on each item resample. Interval
    ``effect ± t_{df} se`` and two-sided ``p = 2 (1 - T_df(|effect| / se))``
    (:func:`seed_item_se`; ``df_items`` as in :func:`seed_item_interval`).
    """
    check_resampling(1, level)
    se = seed_item_se(
        differences,
        item_replicates,
        shared_items=_any_shared(shared_items),
        df_items=_df_items(n, shared_items, df_items),
    )
    est = (
        float(np.mean(as_column(differences, "per-seed differences"))) if effect is None else effect
    )
    B = np.asarray(item_replicates).shape[-1]
    iv = _seed_item_interval(se, est, n, B, level, shared_items, units)
    return PairedTest(
        iv.estimate,
        iv.low,
        iv.high,
        se.p_value(iv.estimate),
        n,
        f"paired {iv.method}",
        level,
        B,
        df=se.df,
    )
