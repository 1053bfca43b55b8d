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
* :func:`hierarchical_bootstrap_ci` and :func:`paired_hierarchical_bootstrap`:
  training seeds and test items resampled together (a two-stage bootstrap:
  seeds with replacement, then each drawn seed's items with replacement;
  Davison & Hinkley 1997, *Bootstrap Methods and their Application*, sec. 3.8),
  so an interval covers both the model's training randomness and the test set.

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

    @property
    def interval(self) -> Interval:
        return Interval(self.effect, self.low, self.high, self.n, self.level, self.method)


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
    return Interval(m, m - half, m + half, k, level, f"t-interval over {k} seeds")


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
    return PairedTest(iv.estimate, iv.low, iv.high, p, x.size, method, level)


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


def _seeds(per_seed: PerSeed, what: str) -> list[list[ItemStatistic]]:
    seeds = [_strata(s) for s in per_seed]
    if not seeds:
        raise PolymnesiaError(f"{what}: need at least one seed")
    shape = [s.n for s in seeds[0]]
    if any([s.n for s in x] != shape for x in seeds):
        raise PolymnesiaError(
            f"{what}: every seed must be scored on the same items (languages and counts); "
            f"got {[[s.n for s in x] for x in seeds]}"
        )
    return seeds


def _two_stage(
    seeds: list[list[ItemStatistic]],
    other: list[list[ItemStatistic]] | None,
    n_resamples: int,
    rng: np.random.Generator,
    shared_items: bool = True,
) -> np.ndarray:
    """Replicates of the mean over seeds (of the mean over strata) of ``a`` (minus ``b``):
    seeds drawn with replacement, and items with replacement (the same items for both arms
    of a pair). ``shared_items``: one item resample per replicate, read by every drawn seed,
    as the seeds were scored on the same test items (crossed design); otherwise each drawn
    seed gets its own item resample (nested design: seeds scored on items of their own)."""
    k = len(seeds)
    draws = rng.integers(0, k, size=(n_resamples, k))
    reps = np.zeros(n_resamples)
    if shared_items:
        rows = np.arange(n_resamples)
        for t in range(len(seeds[0])):
            idx = resample_indices(rng, seeds[0][t].n, n_resamples)
            values = np.stack([x[t].replicates(idx) for x in seeds])  # [k, R]
            if other is not None:
                values = values - np.stack([x[t].replicates(idx) for x in other])
            reps += values[draws, rows[:, None]].mean(axis=1) / len(seeds[0])
        return reps
    for j in range(k):  # position j of every replicate: seed draws[:, j]
        for s in range(k):
            rows = np.nonzero(draws[:, j] == s)[0]
            if not rows.size:
                continue
            for t, stat in enumerate(seeds[s]):
                idx = resample_indices(rng, stat.n, rows.size)
                value = stat.replicates(idx)
                if other is not None:
                    value = value - other[s][t].replicates(idx)
                reps[rows] += value / len(seeds[s])
    return reps / k


def _design(shared_items: bool) -> str:
    return "items shared by the seeds" if shared_items else "items of each seed"


def hierarchical_bootstrap_ci(
    per_seed: PerSeed,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    shared_items: bool = True,
) -> Interval:
    """Interval of the mean over training seeds of a score, seeds and items resampled.

    ``per_seed`` holds, for each training seed, the score's :class:`ItemStatistic` (or one
    per language: the score is then the mean over languages) on the same test items. Each
    replicate draws ``k`` seeds with replacement and the items with replacement, and
    averages. ``shared_items`` (the default; every protocol scores its seeds on one test
    set): one item resample per replicate for all drawn seeds, a crossed design in which the
    item part of the spread is not divided by the number of seeds; ``False``: a resample per
    drawn seed, for seeds scored on items of their own (nested design). With one seed it is
    the item bootstrap (:func:`stratified_bootstrap_ci`), and says so.
    """
    _check(n_resamples, level)
    seeds = _seeds(per_seed, "hierarchical bootstrap")
    estimate = float(np.mean([np.mean([s.value() for s in x]) for x in seeds]))
    if len(seeds) == 1:
        iv = stratified_bootstrap_ci(seeds[0], n_resamples=n_resamples, level=level, seed=seed)
        return Interval(iv.estimate, iv.low, iv.high, iv.n, level, f"one seed: {iv.method}")
    reps = _two_stage(seeds, None, n_resamples, np.random.default_rng(seed), shared_items)
    lo, hi = percentile_interval(reps, level)
    n = sum(s.n for s in seeds[0])
    method = (
        f"two-stage bootstrap over {len(seeds)} training seeds and {n} items "
        f"({_design(shared_items)}; {n_resamples} resamples)"
    )
    return Interval(estimate, lo, hi, n, level, method)


def paired_hierarchical_bootstrap(
    a: PerSeed,
    b: PerSeed,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    shared_items: bool = True,
) -> PairedTest:
    """``mean_seeds(score(a)) - mean_seeds(score(b))`` with seeds and items resampled.

    Seed ``i`` of ``a`` is paired with seed ``i`` of ``b`` (the same training seed of two
    arms), and both arms share each item resample; ``shared_items`` as in
    :func:`hierarchical_bootstrap_ci`. The interval and the
    two-sided p-value are read from the replicated differences as in
    :func:`paired_bootstrap`; with one seed it is :func:`paired_bootstrap` and says so.
    """
    _check(n_resamples, level)
    sa, sb = _seeds(a, "arm a"), _seeds(b, "arm b")
    if len(sa) != len(sb) or [s.n for s in sa[0]] != [s.n for s in sb[0]]:
        raise PolymnesiaError(
            f"paired seeds and items must match: {len(sa)} vs {len(sb)} seeds, "
            f"{[s.n for s in sa[0]]} vs {[s.n for s in sb[0]]} items"
        )
    if len(sa) == 1:
        t = paired_bootstrap(sa[0], sb[0], n_resamples=n_resamples, level=level, seed=seed)
        return PairedTest(
            t.effect, t.low, t.high, t.p_value, t.n, f"one seed: {t.method}", level, n_resamples
        )
    diffs = _two_stage(sa, sb, n_resamples, np.random.default_rng(seed), shared_items)
    effect = float(
        np.mean(
            [
                np.mean([x.value() - y.value() for x, y in zip(p, q, strict=True)])
                for p, q in zip(sa, sb, strict=True)
            ]
        )
    )
    lo, hi = percentile_interval(diffs, level)
    p = min(1.0, 2 * min(float(np.mean(diffs <= 0)), float(np.mean(diffs >= 0))))
    n = sum(s.n for s in sa[0])
    method = (
        f"paired two-stage bootstrap over {len(sa)} training seeds and {n} items "
        f"({_design(shared_items)}; {n_resamples} resamples)"
    )
    return PairedTest(effect, lo, hi, p, n, method, level, n_resamples)


def two_stage_index(
    n_seeds: int, n_draws: int, n_resamples: int, seed: int = 0, *, shared_items: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """The draws of a two-stage bootstrap over seeds whose item resamples are already made.

    Returns ``(seeds, draws)``, both ``[n_resamples, n_seeds]``: replicate ``r`` draws the
    training seeds ``seeds[r]`` with replacement and reads the seed at position ``j`` on the
    item resample ``draws[r, j]`` (of ``n_draws`` made beforehand, the same for every seed,
    as :func:`resample_indices` makes them). ``shared_items`` (the default): every position
    of a replicate reads the same item resample, as the seeds were scored on the same test
    items (a crossed design: seeds and items resampled together, so the item part of the
    spread is not divided by the number of seeds); otherwise each position walks its own
    permutation of the item resamples (the nested design of :func:`hierarchical_bootstrap_ci`,
    for seeds scored on items of their own). With ``n_resamples == n_draws`` every item
    resample is used once per position. Every quantity pooled with the same index is paired
    with every other one (:func:`two_stage_mean`).
    """
    if n_seeds < 1 or n_draws < 1:
        raise PolymnesiaError(
            f"need at least one seed and one item resample, got {n_seeds}, {n_draws}"
        )
    _check(n_resamples, DEFAULT_LEVEL)
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, n_seeds, size=(n_resamples, n_seeds))
    draws = np.empty((n_resamples, n_seeds), dtype=np.int64)
    for j in range(n_seeds):
        if shared_items and j:
            draws[:, j] = draws[:, 0]
            continue
        perm = np.concatenate([rng.permutation(n_draws) for _ in range(-(-n_resamples // n_draws))])
        draws[:, j] = perm[:n_resamples]
    return seeds, draws


def two_stage_mean(values: npt.ArrayLike, index: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Replicates of the mean over training seeds of a quantity with item replicates.

    ``values[s, b]`` is the quantity for seed ``s`` on item resample ``b`` (``[k, B]``);
    replicate ``r`` of the result is the mean over ``j`` of ``values[seeds[r, j], draws[r, j]]``
    (``index`` from :func:`two_stage_index`): seeds resampled, then each drawn seed's items.
    """
    arr = np.asarray(values, dtype=float)
    seeds, draws = index
    if arr.ndim != 2 or seeds.shape != draws.shape or seeds.shape[1] != arr.shape[0]:
        raise PolymnesiaError(
            f"two-stage mean: values {arr.shape} (seeds x item resamples) do not fit an index "
            f"of {seeds.shape[1] if seeds.ndim == 2 else '?'} seeds"
        )
    if draws.size and int(draws.max()) >= arr.shape[1]:
        raise PolymnesiaError(
            f"two-stage mean: the index reads item resample {int(draws.max())}, values have "
            f"{arr.shape[1]}"
        )
    return np.asarray(arr[seeds, draws].mean(axis=1))
