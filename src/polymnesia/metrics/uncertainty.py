"""Uncertainty of reported numbers over test items: bootstrap intervals and paired tests.

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

Over training seeds the same types are used by three modules beside this one:
:mod:`polymnesia.metrics.seed_tests` (Student-t intervals and tests over seeds' values),
:mod:`polymnesia.metrics.seed_items` (the seed x item variance by moments and its
Satterthwaite interval) and :mod:`polymnesia.metrics.hierarchical` (those intervals from
per-seed item statistics, resampled once per shared item). Protocols reach all of them
through :mod:`polymnesia.reports.evidence`.

Every function is seeded (``numpy.random.default_rng(seed)``), so a report
rebuilt from the same items prints the same intervals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError

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


def as_column(values: npt.ArrayLike, what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise PolymnesiaError(f"{what} must be a non-empty list of numbers, got shape {arr.shape}")
    return arr


def as_columns(*cols: np.ndarray, what: str) -> np.ndarray:
    if len({c.size for c in cols}) != 1:
        raise PolymnesiaError(f"{what}: per-item lists differ in length {[c.size for c in cols]}")
    return np.stack(cols, axis=1)


def mean_statistic(values: npt.ArrayLike, name: str = "mean") -> ItemStatistic:
    """The mean of per-item values (e.g. a per-sentence score, 0/1 correctness)."""
    col = as_column(values, name)
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
    num, den = as_column(numerators, name), as_column(denominators, name)
    if den.sum() <= 0 or (den < 0).any():
        raise PolymnesiaError(f"{name}: denominators must be non-negative with a positive sum")

    def reduce(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = scale * x[..., 0].sum(axis=-1) / x[..., 1].sum(axis=-1)
            return np.exp(r) if exp else r  # beyond float range: inf, as exp_or_inf gives

    return ItemStatistic(as_columns(num, den, what=name), reduce, name)


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
        as_columns(p.astype(float), g.astype(float), what="macro_f1"), reduce, "macro_f1"
    )


# ------------------------------------------------------------------- intervals


def check_resampling(n_resamples: int, level: float) -> None:
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
    check_resampling(n_resamples, level)
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


def as_strata(stats_: ItemStatistic | Sequence[ItemStatistic]) -> list[ItemStatistic]:
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
    check_resampling(n_resamples, level)
    strata = as_strata(strata)
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
    sa, sb = as_strata(a), as_strata(b)
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
    check_resampling(n_resamples, level)
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
    check_resampling(n_resamples, 0.5)
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
