"""Bootstrap replicates of accuracy matrices R from the per-item evidence of their entries (paper
004).

Every entry ``R[i, j]`` of Khelli et al. 2025's accuracy matrix is a score on the
test items of language ``order[j]`` (stage ``sequential_step`` keeps them in
``items.jsonl``). A replicate draws, for each *language*, one resample of its
test items (with replacement; Efron & Tibshirani 1993, ch. 6) and recomputes
every entry on that language from that same draw: every step of one order,
every order and every arm of a run. Any function of the matrices (CBT, CFT,
a forgetting variant, a group mean, the difference between two arms) then
has one value per replicate; its percentile interval (ch. 13) is the CI of
the number, and a difference between arms computed on shared replicates is a
paired bootstrap (Koehn 2004). The languages' draws are independent (the
stratified bootstrap of ch. 8): a language's items are its own stratum.

The draw of a language depends only on the seed, the language code and its
item count, so adding an arm to a run does not change the other intervals.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polymnesia.errors import DataError
from polymnesia.metrics.uncertainty import (
    DEFAULT_LEVEL,
    Interval,
    ItemStatistic,
    PairedTest,
    percentile_interval,
    resample_indices,
)


def draw_items(n_items: Mapping[str, int], n_resamples: int, seed: int) -> dict[str, np.ndarray]:
    """``{language: [n_resamples, n] item indices}``, each from a generator seeded by (seed,
    language).
    """
    return {
        lang: resample_indices(
            np.random.default_rng([seed, zlib.crc32(lang.encode("utf-8"))]), n, n_resamples
        )
        for lang, n in n_items.items()
    }


def replicate_matrix(
    cells: Sequence[Sequence[ItemStatistic]],
    order: Sequence[str],
    draws: Mapping[str, np.ndarray],
) -> np.ndarray:
    """``[B, T, T]`` replicates of one R: entry ``(i, j)`` is ``cells[i][j]`` on the draw of
    ``order[j]``.

    A statistic that fills several entries (MULTI's one row repeated, MONO's
    columns below the diagonal) is resampled once.
    """
    T = len(order)
    if len(cells) != T or any(len(row) != T for row in cells):
        raise DataError(f"item cells must be {T} x {T} for order {list(order)}")
    missing = [lang for lang in order if lang not in draws]
    if missing:
        raise DataError(f"no item draw for {', '.join(missing)}")
    B = next(iter(draws.values())).shape[0]
    done: dict[int, np.ndarray] = {}
    out = np.empty((B, T, T))
    for i, row in enumerate(cells):
        for j, stat in enumerate(row):
            idx = draws[order[j]]
            if stat.n != idx.shape[1]:
                raise DataError(
                    f"language '{order[j]}': {stat.n} items in one entry of R, {idx.shape[1]} in "
                    "the draw"
                )
            if id(stat) not in done:
                done[id(stat)] = stat.replicates(idx)
            out[:, i, j] = done[id(stat)]
    return out


@dataclass(frozen=True)
class Replicates:
    """The point value of a quantity and its bootstrap replicates (``values``: ``[B]``).

    ``n`` counts the test items behind it (all languages), ``level`` the
    confidence level of :meth:`interval`.
    """

    point: float
    values: np.ndarray
    n: int
    level: float = DEFAULT_LEVEL
    what: str = "test items"

    def interval(self) -> Interval:
        """The percentile interval of the replicates (NaN replicates left out)."""
        finite = self.values[np.isfinite(self.values)]
        if finite.size < 2 or not np.isfinite(self.point):
            return Interval(self.point, np.nan, np.nan, self.n, self.level, "no replicates")
        lo, hi = percentile_interval(finite, self.level)
        return Interval(self.point, lo, hi, self.n, self.level, self.method())

    def method(self) -> str:
        return f"percentile bootstrap over {self.what} ({self.values.size} resamples)"

    def __sub__(self, other: Replicates) -> Replicates:
        return Replicates(
            self.point - other.point, self.values - other.values, self.n, self.level, self.what
        )

    def test(self) -> PairedTest:
        """This quantity read as a paired difference: interval and two-sided p
        ``min(1, 2 min(P*(d <= 0), P*(d >= 0)))`` (as
        :func:`~polymnesia.metrics.uncertainty.paired_bootstrap`)."""
        iv = self.interval()
        finite = self.values[np.isfinite(self.values)]
        p = (
            min(1.0, 2 * min(float(np.mean(finite <= 0)), float(np.mean(finite >= 0))))
            if finite.size
            else np.nan
        )
        method = f"paired bootstrap over {self.what} ({self.values.size} resamples)"
        return PairedTest(
            iv.estimate, iv.low, iv.high, p, self.n, method, self.level, self.values.size
        )


#: a quantity of one arm: its R matrices (by order) and the replicate index (None: the point)
Quantity = Callable[[Mapping[str, np.ndarray], int | None], Mapping[str, float]]


def replicate_dict(
    fn: Quantity,
    point: Mapping[str, np.ndarray],
    reps: Mapping[str, np.ndarray] | None,
    n: int,
    level: float = DEFAULT_LEVEL,
) -> dict[str, Replicates]:
    """Named quantities ``fn(Rs, k)`` of one arm on its point matrices (``k = None``) and on
    every replicate ``k``; without replicates the values are empty (no interval)."""
    values = dict(fn(point, None))
    if reps is None:
        return {key: Replicates(v, np.array([]), n, level) for key, v in values.items()}
    B = next(iter(reps.values())).shape[0]
    rows = [fn({name: R[k] for name, R in reps.items()}, k) for k in range(B)]
    return {
        key: Replicates(v, np.array([r.get(key, np.nan) for r in rows]), n, level)
        for key, v in values.items()
    }


def replicate(
    fn: Callable[[Mapping[str, np.ndarray]], float],
    point: Mapping[str, np.ndarray],
    reps: Mapping[str, np.ndarray] | None,
    n: int,
    level: float = DEFAULT_LEVEL,
) -> Replicates:
    """One quantity ``fn(Rs)`` of one arm with its replicates (:func:`replicate_dict`)."""
    return replicate_dict(lambda rs, _k: {"v": fn(rs)}, point, reps, n, level)["v"]


def best_of(items: Sequence[Replicates]) -> Replicates:
    """The largest of several quantities, point and replicate by replicate."""
    if not items:
        raise DataError("best_of needs at least one quantity")
    values = (
        np.max(np.stack([r.values for r in items]), axis=0)
        if all(r.values.size for r in items)
        else np.array([])
    )
    first = items[0]
    return Replicates(max(r.point for r in items), values, first.n, first.level, first.what)
