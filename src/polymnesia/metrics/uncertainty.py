"""Uncertainty of reported numbers: bootstrap intervals over test items, paired tests, seed
intervals.

A corpus-level score (accuracy, macro-F1, bits per byte as a ratio of sums,
chrF from summed n-gram statistics) is a function of per-item columns. An
:class:`ItemStatistic` holds those columns (``[n, k]``, one row per test item)
and the function that turns a resample of rows into the score, so one
resampling code path serves every metric:

* :func:`bootstrap_ci`: the percentile bootstrap over items (Efron &
  Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 6 and 13):
  draw ``n`` items with replacement ``B`` times, recompute the score, take the
  ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the replicates.
* :func:`stratified_bootstrap_ci`: a mean over languages (a group mean) with
  the items resampled *within* each language, so every replicate keeps each
  language's size (the multi-sample bootstrap of Efron & Tibshirani 1993, ch. 8).
* :func:`paired_bootstrap`: the difference between two arms scored on the same
  items, each resample shared by both arms (Koehn 2004, "Statistical
  Significance Tests for Machine Translation Evaluation", EMNLP).
* :func:`paired_permutation_test`: approximate randomization: each item's two
  arm outputs are swapped with probability 1/2 (Noreen 1989; recommended for
  NLP metrics by Dror et al. 2018, "The Hitchhiker's Guide to Testing
  Statistical Significance in NLP", ACL).
* :func:`seed_interval` and :func:`paired_seed_test`: Student-t intervals and
  the paired t-test over seeds, where a protocol runs several.
* :func:`hierarchical_bootstrap_ci` and :func:`paired_hierarchical_bootstrap`
  (and :func:`seed_item_interval` / :func:`paired_seed_item_test` for replicates made
  elsewhere): a mean over ``k`` training seeds whose variance is estimated as in a two-way
  random-effects ANOVA by moments (:class:`SeedItemSE`): ``s^2 / k`` over the seeds plus
  the item variance the seeds share, taken from the covariances of the seeds' item
  replicates (one resample of the shared items read by every seed), so the seed x item
  interaction is counted once; a Student t quantile at Satterthwaite degrees of freedom
  (Satterthwaite 1946, "An Approximate Distribution of Estimates of Variance Components",
  Biometrics Bulletin 2(6)) with the seed term counted twice, so an interval covers both
  the model's training randomness and the test set at its level (the coverage simulation
  of :mod:`polymnesia.metrics.seed_item_coverage`), and with few seeds it is as wide as a
  t-interval over them (a percentile bootstrap over 3 seeds cannot reach past the 3
  values).

Every function is seeded (``numpy.random.default_rng(seed)``), so a report
rebuilt from the same items prints the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import paired_ttest

#: resampled columns ``[B, n, k]`` -> one score per replicate ``[B]``
Reduce = Callable[[np.ndarray], np.ndarray]

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95
_CHUNK_CELLS = 4_000_000  # rows x items x columns materialised at once when resampling


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval ``[low, high]`` at ``level`` from ``n`` units.

    ``n`` counts what was resampled (test items, or seeds for a t-interval).
    ``low``/``high`` are NaN when there is no spread to measure (one seed).
    """

    estimate: float
    low: float
    high: float
    n: int
    level: float = DEFAULT_LEVEL
    method: str = ""
    df: float | None = None

    @property
    def half_width(self) -> float:
        """``(high - low) / 2``: what tables print after "±" (percentile intervals may be
        asymmetric).
        """
        return (self.high - self.low) / 2

    @property
    def has_spread(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    def excludes(self, value: float = 0.0) -> bool:
        """Whether ``value`` lies outside ``[low, high]`` (False without a spread)."""
        return self.has_spread and (self.low > value or self.high < value)


@dataclass(frozen=True)
class PairedTest:
    """The difference ``effect = score(a) - score(b)`` between two arms on the same items or seeds.

    ``low``/``high`` bound the effect at ``level`` (NaN for a test that gives no
    interval, such as the permutation test); ``p_value`` is two-sided.
    """

    effect: float
    low: float
    high: float
    p_value: float
    n: int
    method: str
    level: float = DEFAULT_LEVEL
    n_resamples: int | None = None
    df: float | None = None

    @property
    def interval(self) -> Interval:
        return Interval(
            self.effect, self.low, self.high, self.n, self.level, self.method, df=self.df
        )


@dataclass(frozen=True, eq=False)
class ItemStatistic:
    """A corpus-level score as a function of per-item columns: ``reduce(columns[idx])``.

    ``columns`` is ``[n, k]`` (one row per test item); ``reduce`` maps resampled
    columns ``[B, n, k]`` to ``[B]`` scores. Build one with :func:`mean_statistic`,
    :func:`accuracy_statistic`, :func:`ratio_statistic`, :func:`macro_f1_statistic`
    or :func:`sum_statistic`.
    """

    columns: np.ndarray
    reduce: Reduce
    name: str = "score"

    def __post_init__(self) -> None:
        if self.columns.ndim != 2 or self.columns.shape[0] == 0:
            raise PolymnesiaError(
                f"{self.name}: item columns must be a non-empty [n, k] array, got shape "
                f"{self.columns.shape}"
            )

    @property
    def n(self) -> int:
        return int(self.columns.shape[0])

    def value(self) -> float:
        """The score on all items (the number a stage reports)."""
        return float(self.reduce(self.columns[None])[0])

    def replicates(self, idx: np.ndarray) -> np.ndarray:
        """Scores of the resamples ``idx`` (``[B, n]`` item indices), computed in chunks."""
        per_row = max(1, idx.shape[1] * self.columns.shape[1])
        step = max(1, _CHUNK_CELLS // per_row)
        parts = [self.reduce(self.columns[idx[i : i + step]]) for i in range(0, len(idx), step)]
        return np.concatenate(parts).astype(float)


# ------------------------------------------------------------------ statistics


def _column(values: npt.ArrayLike, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise PolymnesiaError(f"{what} must be a non-empty list of numbers, got shape {arr.shape}")
    return arr


def _columns(*cols: np.ndarray, what: str) -> np.ndarray:
    if len({c.size for c in cols}) != 1:
        raise PolymnesiaError(f"{what}: per-item lists differ in length {[c.size for c in cols]}")
    return np.stack(cols, axis=1)


def mean_statistic(values: npt.ArrayLike, name: str = "mean") -> ItemStatistic:
    """The mean of per-item values (e.g. a per-sentence score, 0/1 correctness)."""
    col = _column(values, name)
    return ItemStatistic(col[:, None], lambda x: x[..., 0].mean(axis=-1), name)


def accuracy_statistic(pred: npt.ArrayLike, gold: npt.ArrayLike) -> ItemStatistic:
    """Accuracy ``mean(pred == gold)`` (:func:`polymnesia.metrics.classification.accuracy`)."""
    p, g = np.asarray(pred), np.asarray(gold)
    if p.shape != g.shape or p.ndim != 1:
        raise PolymnesiaError(f"pred and gold must be equal-length lists, got {p.shape}, {g.shape}")
    return mean_statistic((p == g).astype(float), "accuracy")


def ratio_statistic(
    numerators: npt.ArrayLike,
    denominators: npt.ArrayLike,
    *,
    scale: float = 1.0,
    exp: bool = False,
    name: str = "ratio",
) -> ItemStatistic:
    """``scale * sum(num) / sum(den)`` (then ``exp`` if asked), a ratio of sums over items.

    Bits per byte is ``ratio_statistic(nll, bytes, scale=1 / ln 2)``; token
    perplexity ``ratio_statistic(nll, tokens, exp=True)``. A replicate resamples
    whole items and recomputes the ratio, so long texts weigh as they do in
    the reported number. The percentile interval is invariant under the
    monotone ``exp``.
    """
    num, den = _column(numerators, name), _column(denominators, name)
    if den.sum() <= 0 or (den < 0).any():
        raise PolymnesiaError(f"{name}: denominators must be non-negative with a positive sum")

    def reduce(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            r = scale * x[..., 0].sum(axis=-1) / x[..., 1].sum(axis=-1)
        return np.exp(r) if exp else r

    return ItemStatistic(_columns(num, den, what=name), reduce, name)


def sum_statistic(
    columns: npt.ArrayLike, fn: Callable[[np.ndarray], np.ndarray], name: str
) -> ItemStatistic:
    """A score computed from per-item sufficient statistics summed over items.

    ``columns`` is ``[n, k]``; ``fn`` maps the sums ``[B, k]`` to ``[B]``. Corpus
    chrF and BLEU are of this form (sacrebleu sums per-sentence n-gram counts
    before computing the score), and so is span F1 (``2 tp / (n_pred + n_gold)``).
    """
    arr = np.asarray(columns, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise PolymnesiaError(f"{name}: columns must be a non-empty [n, k] array, got {arr.shape}")
    return ItemStatistic(arr, lambda x: fn(x.sum(axis=-2)), name)


def macro_f1_statistic(
    pred: npt.ArrayLike, gold: npt.ArrayLike, n_labels: int | None = None
) -> ItemStatistic:
    """Macro-F1 (:func:`polymnesia.metrics.classification.macro_f1`) of resampled items.

    The label set is fixed on the full sample (``0..n_labels-1``, or the labels
    seen in ``gold`` or ``pred``), so a label missing from a resample scores
    F1 = 0 there, as scikit-learn does with explicit ``labels``.
    """
    p, g = np.asarray(pred), np.asarray(gold)
    if p.shape != g.shape or p.ndim != 1 or p.size == 0:
        raise PolymnesiaError(
            f"pred and gold must be equal-length non-empty lists, got {p.shape}, {g.shape}"
        )
    labels = np.arange(n_labels) if n_labels is not None else np.union1d(p, g)

    def reduce(x: np.ndarray) -> np.ndarray:
        xp, xg = x[..., 0], x[..., 1]
        f1 = np.zeros(x.shape[0])
        for label in labels:
            tp = ((xp == label) & (xg == label)).sum(axis=-1)
            denom = (xp == label).sum(axis=-1) + (xg == label).sum(axis=-1)
            f1 += np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
        return f1 / len(labels)

    return ItemStatistic(
        _columns(p.astype(float), g.astype(float), what="macro_f1"), reduce, "macro_f1"
    )


# ------------------------------------------------------------------- intervals


def _check(n_resamples: int, level: float) -> None:
    if n_resamples < 1:
        raise PolymnesiaError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < level < 1:
        raise PolymnesiaError(f"confidence level must lie in (0, 1), got {level}")


def percentile_interval(
    replicates: npt.ArrayLike, level: float = DEFAULT_LEVEL
) -> tuple[float, float]:
    """The ``(1-level)/2`` and ``(1+level)/2`` quantiles of bootstrap replicates (Efron & Tibshirani
    1993, ch. 13).
    """
    reps = np.asarray(replicates, dtype=float)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def resample_indices(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """``[n_resamples, n]`` item indices drawn uniformly with replacement."""
    return rng.integers(0, n, size=(n_resamples, n))


def bootstrap_ci(
    stat: ItemStatistic,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of ``stat`` over its items (Efron & Tibshirani 1993)."""
    _check(n_resamples, level)
    reps = stat.replicates(resample_indices(np.random.default_rng(seed), stat.n, n_resamples))
    lo, hi = percentile_interval(reps, level)
    return Interval(
        stat.value(),
        lo,
        hi,
        stat.n,
        level,
        f"percentile bootstrap over items ({n_resamples} resamples)",
    )


def _strata(stats_: ItemStatistic | Sequence[ItemStatistic]) -> list[ItemStatistic]:
    out = [stats_] if isinstance(stats_, ItemStatistic) else list(stats_)
    if not out:
        raise PolymnesiaError("need at least one stratum (language) of items")
    return out


def stratified_bootstrap_ci(
    strata: Sequence[ItemStatistic],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> Interval:
    """Interval of the *mean over strata* (e.g. a group's languages), items resampled within each.

    The estimate is the unweighted mean of the strata's scores (as
    :func:`polymnesia.reports.tables.group_means` averages languages); each
    replicate resamples every language's items independently and recomputes
    that mean. ``n`` is the total number of items.
    """
    _check(n_resamples, level)
    strata = _strata(strata)
    rng = np.random.default_rng(seed)
    reps = np.mean([s.replicates(resample_indices(rng, s.n, n_resamples)) for s in strata], axis=0)
    lo, hi = percentile_interval(reps, level)
    estimate = float(np.mean([s.value() for s in strata]))
    method = (
        f"stratified percentile bootstrap over items of {len(strata)} languages ({n_resamples} "
        "resamples)"
    )
    return Interval(estimate, lo, hi, sum(s.n for s in strata), level, method)


def _paired_strata(
    a: ItemStatistic | Sequence[ItemStatistic], b: ItemStatistic | Sequence[ItemStatistic]
) -> list[tuple[ItemStatistic, ItemStatistic]]:
    sa, sb = _strata(a), _strata(b)
    if len(sa) != len(sb) or any(x.n != y.n for x, y in zip(sa, sb, strict=False)):
        raise PolymnesiaError(
            f"paired comparison needs both arms scored on the same items; item counts differ: "
            f"{[s.n for s in sa]} vs {[s.n for s in sb]}"
        )
    return list(zip(sa, sb, strict=True))


def paired_bootstrap(
    a: ItemStatistic | Sequence[ItemStatistic],
    b: ItemStatistic | Sequence[ItemStatistic],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
) -> PairedTest:
    """Paired bootstrap of ``score(a) - score(b)`` on the same items (Koehn 2004).

    Each resample draws the same item indices for both arms (within each
    stratum when lists of per-language statistics are given; the score is then
    the mean over strata). The interval is the percentile interval of the
    replicated differences; the two-sided p-value is
    ``min(1, 2 min(P*(d <= 0), P*(d >= 0)))``, twice the share of resamples in
    which the sign of the difference flips or vanishes (Koehn's "system A is
    better in 95% of the samples" is the one-sided ``P*(d <= 0) < 0.05``).
    """
    _check(n_resamples, level)
    pairs = _paired_strata(a, b)
    rng = np.random.default_rng(seed)
    diffs = np.zeros(n_resamples)
    for x, y in pairs:
        idx = resample_indices(rng, x.n, n_resamples)
        diffs += x.replicates(idx) - y.replicates(idx)
    diffs /= len(pairs)
    effect = float(np.mean([x.value() - y.value() for x, y in pairs]))
    lo, hi = percentile_interval(diffs, level)
    p = min(1.0, 2 * min(float(np.mean(diffs <= 0)), float(np.mean(diffs >= 0))))
    n = sum(x.n for x, _ in pairs)
    return PairedTest(
        effect,
        lo,
        hi,
        p,
        n,
        f"paired bootstrap over {n} items ({n_resamples} resamples)",
        level,
        n_resamples,
    )


def paired_permutation_test(
    a: ItemStatistic | Sequence[ItemStatistic],
    b: ItemStatistic | Sequence[ItemStatistic],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> PairedTest:
    """Approximate randomization test of ``score(a) - score(b)`` on the same items.

    Under the null hypothesis the two arms are exchangeable on every item, so
    each permutation swaps the item rows of ``a`` and ``b`` with probability
    1/2 (independently per item) and recomputes the difference ``d*``; the
    two-sided p-value is ``(1 + #{|d*| >= |d|}) / (1 + R)`` (Noreen 1989; Dror et
    al. 2018, section 3). The test gives no interval: ``low``/``high`` are NaN.
    """
    _check(n_resamples, 0.5)
    pairs = _paired_strata(a, b)
    rng = np.random.default_rng(seed)
    perm = np.zeros(n_resamples)
    for x, y in pairs:
        if x.columns.shape != y.columns.shape:
            raise PolymnesiaError("permutation test needs both arms to have the same item columns")
        for start in range(0, n_resamples, 256):
            swap = rng.random((min(256, n_resamples - start), x.n, 1)) < 0.5
            xa = np.where(swap, y.columns[None], x.columns[None])
            xb = np.where(swap, x.columns[None], y.columns[None])
            perm[start : start + len(swap)] += x.reduce(xa) - y.reduce(xb)
    perm /= len(pairs)
    effect = float(np.mean([x.value() - y.value() for x, y in pairs]))
    p = (1 + int(np.sum(np.abs(perm) >= abs(effect) - 1e-12))) / (1 + n_resamples)
    n = sum(x.n for x, _ in pairs)
    method = f"paired permutation test over {n} items ({n_resamples} permutations)"
    return PairedTest(effect, math.nan, math.nan, p, n, method, DEFAULT_LEVEL, n_resamples)


# ------------------------------------------------------------------------ seeds


def seed_interval(values: npt.ArrayLike, level: float = DEFAULT_LEVEL) -> Interval:
    """Mean over seeds with the Student-t interval ``mean ± t_{(1+level)/2, k-1} s / sqrt(k)``.

    ``s`` is the sample standard deviation (ddof = 1). With one seed there is
    no spread: ``low``/``high`` are NaN.
    """
    _check(1, level)
    x = _column(values, "seed values")
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

    x, y = _column(a, "arm a seeds"), _column(b, "arm b seeds")
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
    x, y = _column(a, "group a units"), _column(b, "group b units")
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


# ------------------------------------------------------------ seeds and items

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
    x = _column(points, "per-seed estimates")
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
    _check(1, level)
    se = seed_item_se(
        points,
        item_replicates,
        shared_items=_any_shared(shared_items),
        df_items=_df_items(n, shared_items, df_items),
    )
    est = float(np.mean(_column(points, "per-seed estimates"))) if estimate is None else estimate
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
    _check(1, level)
    se = seed_item_se(
        differences,
        item_replicates,
        shared_items=_any_shared(shared_items),
        df_items=_df_items(n, shared_items, df_items),
    )
    est = float(np.mean(_column(differences, "per-seed differences"))) if effect is None else effect
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


def _seeds(per_seed: PerSeed, what: str, shared_items: Shared = True) -> list[list[ItemStatistic]]:
    """Each seed's strata; a crossed design (``shared_items`` True) needs the same item count
    in each stratum of every seed, a partly shared one at least the shared items in every
    seed, a nested one the same number of strata."""
    seeds = [_strata(s) for s in per_seed]
    if not seeds:
        raise PolymnesiaError(f"{what}: need at least one seed")
    shape = [s.n for s in seeds[0]]
    if shared_items is True and any([s.n for s in x] != shape for x in seeds):
        raise PolymnesiaError(
            f"{what}: every seed must be scored on the same items (languages and counts); "
            f"got {[[s.n for s in x] for x in seeds]}"
        )
    if any(len(x) != len(shape) for x in seeds):
        raise PolymnesiaError(
            f"{what}: every seed must be scored in the same languages; got "
            f"{[len(x) for x in seeds]} strata"
        )
    if not isinstance(shared_items, bool):
        counts = list(shared_items)
        if len(counts) != len(shape) or any(
            c < 0 or c > st.n for x in seeds for c, st in zip(counts, x, strict=True)
        ):
            raise PolymnesiaError(
                f"{what}: shared item counts {counts} do not fit the strata of "
                f"{[[st.n for st in x] for x in seeds]} items"
            )
    return seeds


def _shared_counts(seeds: list[list[ItemStatistic]], shared_items: Shared) -> list[int]:
    if shared_items is True:
        return [st.n for st in seeds[0]]
    if shared_items is False:
        return [0] * len(seeds[0])
    return [int(c) for c in shared_items]


def _per_seed_replicates(
    seeds: list[list[ItemStatistic]],
    other: list[list[ItemStatistic]] | None,
    n_resamples: int,
    rng: np.random.Generator,
    shared_items: Shared = True,
) -> np.ndarray:
    """``[k, B]`` item-bootstrap replicates of each seed's score (mean over strata) of ``a``
    (minus ``b``, on the same item resample). In each stratum the items every seed shares
    (all where ``shared_items`` is True, the leading ``shared_items[t]`` of stratum ``t``
    where it is a list) get one resample per replicate, read by every seed; each seed's
    other items are resampled on their own, so a replicate keeps both counts."""
    k = len(seeds)
    reps = np.zeros((k, n_resamples))
    for t, m in enumerate(_shared_counts(seeds, shared_items)):
        shared = resample_indices(rng, m, n_resamples) if m else None
        for s in range(k):
            n_own = seeds[s][t].n - m
            own = m + resample_indices(rng, n_own, n_resamples) if n_own else None
            parts = [p for p in (shared, own) if p is not None]
            idx = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
            value = seeds[s][t].replicates(idx)
            if other is not None:
                value = value - other[s][t].replicates(idx)
            reps[s] += value
    return reps / len(seeds[0])


def hierarchical_bootstrap_ci(
    per_seed: PerSeed,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    shared_items: Shared = True,
) -> Interval:
    """Interval of the mean over training seeds of a score: seed and item variance combined.

    ``per_seed`` holds, for each training seed, the score's :class:`ItemStatistic` (or one
    per language: the score is then the mean over languages). With ``k >= 2`` seeds the
    interval is :func:`seed_item_interval` (:class:`SeedItemSE`): the seed spread ``s^2 / k``
    plus the part of the item variance the seeds share (the seed x item interaction, which
    ``s^2`` already holds, counted once), with a Student t quantile at Satterthwaite degrees
    of freedom, so that with few seeds the interval reaches past the seed values as a
    t-interval does (a percentile bootstrap over 3 seeds cannot). ``shared_items`` says
    which items the seeds share (:data:`Shared`; :func:`polymnesia.items.across_seeds`
    finds it): ``True`` (the default; every protocol scores its seeds on one test set), one
    item resample per replicate read by every seed (crossed design); ``False``, a resample
    per seed (nested design: the interval is the t-interval over the seeds); per stratum
    the number of leading items every seed shares, those resampled together and each
    seed's others on their own. With one seed it is the item bootstrap
    (:func:`stratified_bootstrap_ci`), and says so.
    """
    _check(n_resamples, level)
    seeds = _seeds(per_seed, "hierarchical bootstrap", shared_items)
    points = [float(np.mean([s.value() for s in x])) for x in seeds]
    estimate = float(np.mean(points))
    if len(seeds) == 1:
        iv = stratified_bootstrap_ci(seeds[0], n_resamples=n_resamples, level=level, seed=seed)
        return Interval(iv.estimate, iv.low, iv.high, iv.n, level, f"one seed: {iv.method}")
    reps = _per_seed_replicates(seeds, None, n_resamples, np.random.default_rng(seed), shared_items)
    n = sum(s.n for s in seeds[0])
    return seed_item_interval(
        points, reps, n=n, level=level, shared_items=shared_items, estimate=estimate
    )


def paired_hierarchical_bootstrap(
    a: PerSeed,
    b: PerSeed,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    shared_items: Shared = True,
) -> PairedTest:
    """``mean_seeds(score(a)) - mean_seeds(score(b))`` with seed and item variance combined.

    Seed ``i`` of ``a`` is paired with seed ``i`` of ``b`` (the same training seed of two
    arms), and both arms share each item resample; with ``k >= 2`` seeds the test is
    :func:`paired_seed_item_test` of the per-seed differences (``shared_items`` as in
    :func:`hierarchical_bootstrap_ci`); with one seed it is :func:`paired_bootstrap` and
    says so.
    """
    _check(n_resamples, level)
    sa, sb = _seeds(a, "arm a", shared_items), _seeds(b, "arm b", shared_items)
    counts = [[s.n for s in x] for x in sa], [[s.n for s in y] for y in sb]
    if counts[0] != counts[1]:
        k = next((i for i, (x, y) in enumerate(zip(*counts, strict=False)) if x != y), 0)
        raise PolymnesiaError(
            f"paired seeds and items must match: {len(sa)} vs {len(sb)} seeds, "
            f"{[s.n for s in sa[k]]} vs {[s.n for s in sb[k]]} items"
        )
    if len(sa) == 1:
        t = paired_bootstrap(sa[0], sb[0], n_resamples=n_resamples, level=level, seed=seed)
        return PairedTest(
            t.effect, t.low, t.high, t.p_value, t.n, f"one seed: {t.method}", level, n_resamples
        )
    diffs = [
        float(np.mean([x.value() - y.value() for x, y in zip(p, q, strict=True)]))
        for p, q in zip(sa, sb, strict=True)
    ]
    reps = _per_seed_replicates(sa, sb, n_resamples, np.random.default_rng(seed), shared_items)
    n = sum(s.n for s in sa[0])
    return paired_seed_item_test(
        diffs, reps, n=n, level=level, shared_items=shared_items, effect=float(np.mean(diffs))
    )
