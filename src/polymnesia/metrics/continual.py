"""Continual-learning metrics on the accuracy matrix ``R``.

``R[i, j]`` is the score on language ``j`` after training step ``i`` (0-based).
Rows are the training steps in the order the languages were learned and, unless
an explicit column order is passed (:func:`to_learning_order`), the columns are
the same languages in the same order, so ``R[i, i]`` is the score on the
language just learned. The papers index ``R`` from 1; every docstring says how
its 1-based indices map onto 0-based numpy.

Sources:

* Khelli et al., "What Causes Knowledge Loss in Multilingual Language Models?"
  (shared/papers/004, sections 3.3-3.4): average score after each step
  (Figure 2), performance shift ``P_avg`` (eq. 9), CFT (eqs. 10-11), CBT
  (eq. 12), multi-hop MFT_h / MBT_h (eqs. 13-14).
* Mao et al., "Less-Forgetting Multi-Lingual Fine-Tuning" (shared/papers/003):
  average relative F1 score ``R_T`` (section 5.3.2).
* Lopez-Paz & Ranzato 2017 (GEM) BWT and FWT, and forgetting in four named
  variants: in :mod:`polymnesia.metrics.forgetting`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric
from polymnesia.metrics.forgetting import (  # noqa: F401  (re-exported: one import for R metrics)
    _matrix,
    bwt_gem,
    forgetting_after_learning,
    forgetting_best_before_final,
    forgetting_best_since_learned,
    forgetting_mammoth,
    fwt_vs_untrained,
)

Kind = Literal["mft", "mbt"]


def to_learning_order(
    R: npt.ArrayLike, order: Sequence[str], columns: Sequence[str] | None = None
) -> np.ndarray:
    """Permute the columns of ``R`` into the learning ``order``.

    ``columns`` names the languages of ``R``'s columns (for example a fixed
    alphabetical evaluation order); ``None`` means they already follow ``order``.
    """
    arr = _matrix(R)
    if len(order) != arr.shape[0] or len(set(order)) != len(order):
        raise PolymnesiaError(
            f"order must list {arr.shape[0]} distinct languages (one per step of R), got "
            f"{list(order)}"
        )
    if columns is None:
        return arr
    if sorted(columns) != sorted(order):
        raise PolymnesiaError(
            f"columns {list(columns)} must name the same languages as the order {list(order)}"
        )
    return arr[:, [list(columns).index(lang) for lang in order]]


@register_metric(
    "average_learned",
    higher_is_better=True,
    description="mean score over the languages learned so far, after each step (Khelli et al. "
    "2025, Figure 2)",
)
def average_learned(R: npt.ArrayLike) -> np.ndarray:
    """Average score over the languages learned so far, after each step: ``P`` of Khelli et al.
    2025.

    ``P[i] = mean(R[i, 0..i])`` (0-based), the curve of Figure 2 in 004 and the
    ``P_t`` of its eqs. 9, 13 and 14 ("average performance on tasks seen up to
    step t"); paper step ``t`` (1-based) is ``P[t - 1]`` here.
    """
    arr = _matrix(R)
    lower = np.tril(arr)
    return lower.sum(axis=1) / np.arange(1, arr.shape[0] + 1)


Shift = Literal["literal", "previous"]
SHIFTS: tuple[Shift, ...] = ("literal", "previous")


def performance_shift_steps(R: npt.ArrayLike, shift: Shift = "literal") -> np.ndarray:
    """``P_t - P_{t+1}`` for one order: the drop caused by learning each language (004, eq. 9).

    Returns ``[T]``: entry ``i`` belongs to the language learned at step ``i``;
    entry 0 is NaN (no language was learned before it). Two readings:

    * ``shift="literal"`` (default, eq. 9 as written): ``P_{t+1}`` averages
      every language seen up to ``t+1``, the new one included:
      ``mean(R[i-1, :i]) - mean(R[i, :i+1])``.
    * ``shift="previous"`` (the prose of section 3.3.1, "the change in a
      previously learned language performance"): both sides average only the
      languages learned before: ``mean(R[i-1, :i]) - mean(R[i, :i])``.

    The two can differ in sign (the new language's own score usually rises
    most). Positive values are drops (the paper's sign).
    """
    if shift not in SHIFTS:
        raise PolymnesiaError(f"shift must be one of {', '.join(SHIFTS)}, got {shift!r}")
    arr = _matrix(R)
    out = np.full(arr.shape[0], np.nan)
    for i in range(1, arr.shape[0]):
        after = arr[i, : i + 1] if shift == "literal" else arr[i, :i]
        out[i] = arr[i - 1, :i].mean() - after.mean()
    return out


@register_metric(
    "performance_shift",
    higher_is_better=False,
    description=(
        "P_avg: average drop P_t - P_t+1 caused by learning each language, over orders (Khelli "
        "et al. 2025, eq. 9)"
    ),
)
def performance_shift(
    orders: Sequence[Sequence[str]],
    Rs: Sequence[npt.ArrayLike],
    columns: Sequence[str] | None = None,
    shift: Shift = "literal",
) -> dict[str, float]:
    """Per language, ``P_avg = 1/N sum_n (P_t - P_{t+1})`` over the N orders (004, eq. 9).

    ``orders[n]`` lists the languages in the order of run ``n`` and ``Rs[n]``
    is its accuracy matrix (columns in ``columns`` order, or in ``orders[n]``
    order when ``columns`` is None). In run ``n`` the language is learned at
    step ``t+1``; ``shift`` picks the reading (:func:`performance_shift_steps`;
    report it with the numbers). Departure: an order that starts with the
    language has no ``P_t``, so N counts only the orders in which the language
    is not first (NaN if it is first in all of them).
    """
    per_order = [
        dict(
            zip(
                order,
                performance_shift_steps(to_learning_order(R, order, columns), shift),
                strict=True,
            )
        )
        for order, R in zip(_pairs(orders, Rs), Rs, strict=True)
    ]
    return {lang: _nanmean([d[lang] for d in per_order]) for lang in per_order[0]}


@register_metric(
    "cft",
    higher_is_better=True,
    description=(
        "cross-lingual forward transfer: mean score on not-yet-learned languages (Khelli et al. "
        "2025, eqs. 10-11)"
    ),
)
def cft(R: npt.ArrayLike) -> float:
    """Cross-lingual forward transfer (004, eqs. 10-11, after Winata et al. 2023a).

    ``CFT = 1/(T-1) sum_{i=1}^{T-1} Xbar_i`` with ``Xbar_i = 1/(T-i) sum_{j=i+1}^{T} R_{i,j}``.
    0-based: ``mean over i = 0..T-2 of mean(R[i, i+1:])``: the average score
    on the languages not learned yet, row by row (each row weighted equally).
    """
    arr = _matrix(R, min_steps=2)
    return float(np.mean([arr[i, i + 1 :].mean() for i in range(arr.shape[0] - 1)]))


@register_metric(
    "cbt",
    higher_is_better=True,
    description=(
        "cross-lingual backward transfer: final minus just-learned score, earlier languages "
        "(Khelli et al. 2025, eq. 12)"
    ),
)
def cbt(R: npt.ArrayLike, row: Literal["last", "paper"] = "last") -> float:
    """Cross-lingual backward transfer (004, eq. 12, after Winata et al. 2023a).

    ``CBT = 1/(T-1) sum_{i=1}^{T-1} (R_{T-1,i} - R_{i,i})``. We read
    ``R_{T-1,i}`` as the row after the LAST step, i.e. 0-based
    ``mean over i = 0..T-2 of R[T-1, i] - R[i, i]``: the 1-based literal
    reading (row ``T-1``, 0-based ``T-2``) would ignore the last step and
    always contribute a zero term for ``i = T-1``; Winata et al. and GEM's BWT
    (which this then equals) use the final row. ``row="paper"`` gives the
    literal reading: ``1/(T-1) sum_{i=0}^{T-2} (R[T-2, i] - R[i, i])``.
    """
    if row not in ("last", "paper"):
        raise PolymnesiaError(f"cbt row must be 'last' or 'paper', got {row!r}")
    arr = _matrix(R, min_steps=2)
    T = arr.shape[0]
    final = T - 1 if row == "last" else T - 2
    return float(np.mean([arr[final, i] - arr[i, i] for i in range(T - 1)]))


def _multi_hop(R: npt.ArrayLike, hops: int, kind: Kind) -> np.ndarray:
    arr = _matrix(R)
    if hops < 0:
        raise PolymnesiaError(f"hops must be >= 0, got {hops}")
    P = average_learned(arr)
    T = arr.shape[0]
    out = np.full((T, hops + 1), np.nan)
    for p in range(T):
        for h in range(hops + 1):
            lo, hi = (p - 1, p + h) if kind == "mft" else (p - h - 1, p)
            if lo >= 0 and hi < T:
                out[p, h] = P[hi] - P[lo]
    return out


@register_metric(
    "mft",
    higher_is_better=True,
    description="multi-hop forward transfer MFT_h = P_{i+h} - P_{i-1} per language (Khelli et "
    "al. 2025, eq. 13)",
)
def mft(R: npt.ArrayLike, hops: int) -> np.ndarray:
    """Multi-hop forward transfer for one order (004, eq. 13): ``[T, hops+1]``.

    For the language learned at paper step ``i`` (0-based row ``p = i-1``),
    ``MFT_h = P_{i+h} - P_{i-1}``, i.e. ``P[p+h] - P[p-1]`` with ``P`` from
    :func:`average_learned`. Row ``p`` of the result is that language, column
    ``h`` the hop; NaN where the formula leaves the sequence (the first
    language has no ``P_{i-1}``; ``i+h`` past the last step). The ``1/|L|``
    average of eq. 13 is taken over orders by :func:`multi_hop_by_language`.
    ``h = 0`` gives ``P_i - P_{i-1}``, minus the performance shift of eq. 9.
    """
    return _multi_hop(R, hops, "mft")


@register_metric(
    "mbt",
    higher_is_better=True,
    description="multi-hop backward transfer MBT_h = P_i - P_{i-h-1} per language (Khelli et "
    "al. 2025, eq. 14)",
)
def mbt(R: npt.ArrayLike, hops: int) -> np.ndarray:
    """Multi-hop backward transfer for one order (004, eq. 14): ``[T, hops+1]``.

    For the language learned at paper step ``i`` (0-based row ``p = i-1``),
    ``MBT_h = P_i - P_{i-h-1}``, i.e. ``P[p] - P[p-h-1]``; NaN where
    ``p-h-1 < 0``. Read literally as the paper writes it (with ``P`` the
    average over languages seen so far); ``MBT_0 == MFT_0``, as the paper's
    "hop zero corresponds to the performance change metric" implies.
    """
    return _multi_hop(R, hops, "mbt")


def multi_hop_by_language(
    orders: Sequence[Sequence[str]],
    Rs: Sequence[npt.ArrayLike],
    hops: int,
    kind: Kind = "mft",
    columns: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Average MFT_h or MBT_h per language over several orders: ``{lang: [hops+1]}``.

    This is the ``1/|L| sum_{l in L}`` of eqs. 13-14 as we read it: for each
    language, the mean over the orders in which hop ``h`` is defined for it
    (NaN-aware); NaN if it is defined in none. These are the columns of the
    heatmaps in Figures 5-6 of 004.
    """
    if kind not in ("mft", "mbt"):
        raise PolymnesiaError(f"kind must be 'mft' or 'mbt', got {kind!r}")
    fn = mft if kind == "mft" else mbt
    stacked: dict[str, list[np.ndarray]] = {}
    for order, R in zip(_pairs(orders, Rs), Rs, strict=True):
        values = fn(to_learning_order(R, order, columns), hops)
        for p, lang in enumerate(order):
            stacked.setdefault(lang, []).append(values[p])
    return {lang: _nanmean_rows(np.stack(v)) for lang, v in stacked.items()}


@register_metric(
    "average_relative_score",
    higher_is_better=True,
    description="R_T: mean ratio of multi-lingual to single-lingual fine-tuning score (Mao et "
    "al. 2022, 5.3.2)",
)
def average_relative_score(
    multi_scores: Mapping[str, float] | npt.ArrayLike,
    single_scores: Mapping[str, float] | npt.ArrayLike,
) -> float:
    """Average relative F1 score ``R_T = 1/T sum_t S_t^m / S_t^s`` (003, section 5.3.2).

    ``S_t^m`` is the multi-lingual model's score on fine-tuning language ``t``,
    ``S_t^s`` the single-lingual model's. Pass two dicts keyed by language
    (same keys) or two aligned arrays. ``R_T > 1`` means multi-lingual
    fine-tuning beats single-lingual fine-tuning on average.
    """
    if isinstance(multi_scores, Mapping) or isinstance(single_scores, Mapping):
        if not (isinstance(multi_scores, Mapping) and isinstance(single_scores, Mapping)):
            raise PolymnesiaError(
                "pass both multi_scores and single_scores as dicts, or both as arrays"
            )
        if set(multi_scores) != set(single_scores):
            raise PolymnesiaError(
                "multi and single scores must cover the same languages, got "
                f"{sorted(multi_scores)} vs {sorted(single_scores)}"
            )
        keys = sorted(multi_scores)
        m = np.array([multi_scores[k] for k in keys], dtype=float)
        s = np.array([single_scores[k] for k in keys], dtype=float)
    else:
        m, s = np.asarray(multi_scores, dtype=float), np.asarray(single_scores, dtype=float)
    if m.shape != s.shape or m.ndim != 1 or m.size == 0:
        raise PolymnesiaError(
            f"need two equal-length non-empty score lists, got shapes {m.shape} and {s.shape}"
        )
    if np.any(s == 0):
        raise PolymnesiaError("single-lingual scores must be non-zero (they divide)")
    return float(np.mean(m / s))


def _pairs(orders: Sequence[Sequence[str]], Rs: Sequence[npt.ArrayLike]) -> Sequence[Sequence[str]]:
    if len(orders) != len(Rs) or not orders:
        raise PolymnesiaError(
            f"need one R per order, got {len(orders)} orders and {len(Rs)} matrices"
        )
    if any(sorted(o) != sorted(orders[0]) for o in orders):
        raise PolymnesiaError("every order must permute the same languages")
    return orders


def _nanmean(values: Sequence[float]) -> float:
    arr = np.asarray(values, dtype=float)
    return float(arr[~np.isnan(arr)].mean()) if np.any(~np.isnan(arr)) else float("nan")


def _nanmean_rows(stack: np.ndarray) -> np.ndarray:
    return np.array([_nanmean(list(stack[:, h])) for h in range(stack.shape[1])])
