"""Significance tests for comparing methods, as Mao et al. (shared/papers/003) use them.

* Per table: a paired t-test over seeds of the reference method (LF-MLF)
  against each other method, at 0.05 (003, Tables 1-3, marked with a dot).
* Across settings: the Friedman test on the methods' ranks, then the
  Bonferroni-Dunn post-hoc test against a control method, drawn as a
  critical-difference (CD) diagram (003, section 5.2.1 and Figure 2).

The rank statistics follow Demsar, "Statistical Comparisons of Classifiers
over Multiple Data Sets", JMLR 7 (2006), section 3.2.2.

Readings of 003 (which names the tests but not these details): the t-test is
paired by seed (run ``k`` of one method against run ``k`` of the other) and
two-sided; the Friedman blocks are the tasks ("across the three
applications": F_0.05(3, 6) = 4.76 means 4 methods and 3 blocks), see
:func:`friedman_by_blocks` for the choice between tasks and languages.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from polymnesia.errors import PolymnesiaError

SUPERIOR = "●"  # the reference is significantly better than this method (003's mark)
INFERIOR = "○"  # the reference is significantly worse (not used in 003; see significance_marks)


def paired_ttest(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[float, float]:
    """Two-sided paired t-test of ``a`` against ``b`` over seeds: ``(t, p)``.

    ``a[k]`` and ``b[k]`` must come from the same seed ``k``. ``t > 0`` means
    ``a`` is larger on average. NaN when every difference is equal to zero.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise PolymnesiaError(
            f"paired t-test needs two equal-length lists of >= 2 seeds, got shapes {x.shape} and "
            f"{y.shape}"
        )
    d = x - y
    if np.all(d == d[0]):  # zero variance: scipy warns; answer directly
        if d[0] == 0:
            return float("nan"), float("nan")
        return float(np.sign(d[0]) * np.inf), 0.0
    res = stats.ttest_rel(x, y)
    return float(res.statistic), float(res.pvalue)


def significance_marks(
    results: Mapping[str, Sequence[float]],
    reference: str = "lf_mlf",
    alpha: float = 0.05,
    higher_is_better: bool = True,
) -> dict[str, str]:
    """Mark each method as 003's Tables 1-3 do: ``"●"`` where the reference is significantly better.

    ``results[method]`` holds one score per seed (same seeds, same order for
    every method). For each method other than ``reference``, a two-sided paired
    t-test (:func:`paired_ttest`) at level ``alpha``; ``"●"`` if ``p < alpha``
    and the reference's mean is better, ``""`` otherwise. The reference gets
    ``""``. Extension: ``"○"`` where the reference is significantly WORSE; 003
    has no such case and defines no mark for it.
    """
    if reference not in results:
        raise PolymnesiaError(
            f"reference method '{reference}' is not among the results; accepted: {sorted(results)}"
        )
    ref = np.asarray(results[reference], dtype=float)
    marks: dict[str, str] = {}
    for method, scores in results.items():
        if method == reference:
            marks[method] = ""
            continue
        t, p = paired_ttest(ref, scores)
        better = t > 0 if higher_is_better else t < 0
        marks[method] = "" if not p < alpha else (SUPERIOR if better else INFERIOR)
    return marks


def _scores(scores: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(scores, dtype=float)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 2:
        raise PolymnesiaError(
            f"scores must be [n_settings, n_methods] with >= 2 methods, got shape {arr.shape}"
        )
    if np.isnan(arr).any():
        raise PolymnesiaError("scores contain NaN; every method needs a score in every setting")
    return arr


def average_ranks(scores: npt.ArrayLike, higher_is_better: bool = True) -> np.ndarray:
    """Average rank of each method over settings (Demsar 2006): ``[n_methods]``.

    ``scores[s, m]`` is method ``m``'s score in setting ``s`` (data set, task).
    Rank 1 is the best; tied methods share the average of their ranks.
    """
    arr = _scores(scores)
    signed = -arr if higher_is_better else arr
    return np.asarray(stats.rankdata(signed, axis=1).mean(axis=0))


def friedman(
    scores: npt.ArrayLike,
    higher_is_better: bool = True,
    statistic: Literal["iman_davenport", "chi2"] = "iman_davenport",
) -> tuple[float, float]:
    """Friedman test over ``scores[n_settings, n_methods]``: ``(statistic, p)``.

    ``chi2_F = 12N / (k(k+1)) [sum_j R_j^2 - k(k+1)^2 / 4]`` from the average
    ranks ``R_j`` (Demsar 2006, section 3.2.2, no tie correction). By default
    returns the Iman-Davenport statistic ``F_F = (N-1) chi2_F / (N(k-1) - chi2_F)``,
    F-distributed with ``(k-1, (k-1)(N-1))`` degrees of freedom; this is the
    statistic 003 reports (5.5 against the critical 4.76 = F_0.05(3, 6), see
    :func:`friedman_critical`). ``statistic="chi2"`` gives ``chi2_F`` with
    its chi-square p-value (k-1 degrees of freedom).
    """
    arr = _scores(scores)
    n, k = arr.shape
    ranks = average_ranks(arr, higher_is_better)
    chi2 = 12 * n / (k * (k + 1)) * (np.sum(ranks**2) - k * (k + 1) ** 2 / 4)
    if statistic == "chi2":
        return float(chi2), float(stats.chi2.sf(chi2, k - 1))
    if statistic != "iman_davenport":
        raise PolymnesiaError(f"statistic must be 'iman_davenport' or 'chi2', got {statistic!r}")
    if n < 2:
        raise PolymnesiaError("the Iman-Davenport statistic needs at least 2 settings")
    denom = n * (k - 1) - chi2
    ff = float("inf") if denom <= 0 else (n - 1) * chi2 / denom
    return float(ff), float(stats.f.sf(ff, k - 1, (k - 1) * (n - 1)))


def friedman_critical(n_methods: int, n_settings: int, alpha: float = 0.05) -> float:
    """Critical value of the Iman-Davenport statistic: ``F_{1-alpha}(k-1, (k-1)(N-1))``."""
    k, n = _check_kn(n_methods, n_settings, alpha)
    return float(stats.f.ppf(1 - alpha, k - 1, (k - 1) * (n - 1)))


def bonferroni_dunn_q(n_methods: int, alpha: float = 0.05) -> float:
    """Bonferroni-Dunn critical value ``q_alpha = z_{1 - alpha / (2(k-1))}`` (Demsar 2006, Table
    5b).

    The two-tailed normal quantile with the Bonferroni correction for the
    ``k-1`` comparisons with the control; e.g. k = 5, alpha = 0.05 -> 2.498.
    """
    k, _ = _check_kn(n_methods, 1, alpha)
    return float(stats.norm.ppf(1 - alpha / (2 * (k - 1))))


def nemenyi_q(n_methods: int, alpha: float = 0.05) -> float:
    """Nemenyi critical value: studentized range ``q_{1-alpha}(k, inf) / sqrt(2)`` (Demsar 2006,
    Table 5a).
    """
    k, _ = _check_kn(n_methods, 1, alpha)
    return float(stats.studentized_range.ppf(1 - alpha, k, np.inf) / np.sqrt(2))


def bonferroni_dunn_cd(n_methods: int, n_settings: int, alpha: float = 0.05) -> float:
    """Critical difference of the Bonferroni-Dunn test: ``q_alpha sqrt(k(k+1) / (6N))`` (Demsar
    2006).

    A method differs significantly from the control when their average ranks
    differ by at least this much. 003's Figure 2 uses alpha = 0.1.
    """
    k, n = _check_kn(n_methods, n_settings, alpha)
    return bonferroni_dunn_q(k, alpha) * float(np.sqrt(k * (k + 1) / (6 * n)))


def nemenyi_cd(n_methods: int, n_settings: int, alpha: float = 0.05) -> float:
    """Critical difference of the Nemenyi test (all pairs): ``q_alpha sqrt(k(k+1) / (6N))``."""
    k, n = _check_kn(n_methods, n_settings, alpha)
    return nemenyi_q(k, alpha) * float(np.sqrt(k * (k + 1) / (6 * n)))


def _check_kn(n_methods: int, n_settings: int, alpha: float) -> tuple[int, int]:
    if n_methods < 2 or n_settings < 1:
        raise PolymnesiaError(
            f"need >= 2 methods and >= 1 setting, got {n_methods} methods and {n_settings} settings"
        )
    if not 0 < alpha < 1:
        raise PolymnesiaError(f"alpha must lie in (0, 1), got {alpha}")
    return n_methods, n_settings


Blocks = Literal["tasks", "languages"]
BLOCKS: tuple[Blocks, ...] = ("tasks", "languages")


def default_blocks(n_tasks: int) -> Blocks:
    """``"tasks"`` when the run has at least two tasks (as 003 does), else ``"languages"``."""
    return "tasks" if n_tasks >= 2 else "languages"


@dataclass(frozen=True)
class FriedmanResult:
    """A Friedman test over blocks and the Bonferroni-Dunn CD that goes with it."""

    blocks: Blocks  # what one block of the test is
    block_names: list[str]  # "task" or "task:lang", one per row of ``scores``
    methods: list[str]
    scores: np.ndarray  # [n_blocks, n_methods], averaged over seeds (and languages)
    statistic: float  # Iman-Davenport F_F
    p: float
    critical: float  # F_F critical value at ``alpha``
    ranks: dict[str, float]  # average rank per method (1 = best)
    cd: float  # Bonferroni-Dunn critical difference at ``cd_alpha``


def block_scores(
    records: Iterable[tuple[str, str, str, float]], methods: Sequence[str], blocks: Blocks
) -> tuple[list[str], np.ndarray]:
    """Rows of Friedman blocks from ``(task, language, method, value)`` records.

    Values of one (task, language, method) cell (the seeds) are averaged.
    ``blocks="languages"``: one block per (task, language) that every method
    has. ``blocks="tasks"``: one block per task, each method's score being
    its mean over the languages of that task that every method has.
    """
    if blocks not in BLOCKS:
        raise PolymnesiaError(f"blocks must be one of {', '.join(BLOCKS)}, got {blocks!r}")
    cell: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for task, lang, method, value in records:
        cell[(task, lang)][method].append(float(value))
    full = {k: v for k, v in sorted(cell.items()) if all(m in v for m in methods)}
    means = {k: [float(np.mean(v[m])) for m in methods] for k, v in full.items()}
    if blocks == "languages":
        return [f"{t}:{lang}" for t, lang in means], np.asarray(list(means.values()))
    tasks = sorted({t for t, _ in means})
    rows = [np.mean([v for (t, _), v in means.items() if t == task], axis=0) for task in tasks]
    return tasks, np.asarray(rows)


def friedman_by_blocks(
    records: Iterable[tuple[str, str, str, float]],
    methods: Sequence[str],
    blocks: Blocks | None = None,
    higher_is_better: bool = True,
    alpha: float = 0.05,
    cd_alpha: float = 0.1,
) -> FriedmanResult:
    """Friedman (Iman-Davenport) test and Bonferroni-Dunn CD with tasks or languages as blocks.

    ``blocks=None`` picks :func:`default_blocks` from the number of tasks in
    ``records``. 003 (section 5.2.1) uses the three tasks as blocks. With
    languages as blocks the p-value is optimistic: the languages of one task
    are scored on the same fine-tuned models, so their rankings share each
    run's random luck and are not the independent blocks the test assumes;
    counting them as N blocks inflates N, and with it F_F (for the same
    average ranks) and the CD's ``1/sqrt(N)`` shrinkage. Report which was used.
    """
    recs = list(records)
    chosen = default_blocks(len({r[0] for r in recs})) if blocks is None else blocks
    names, arr = block_scores(recs, methods, chosen)
    if len(names) < 2:
        raise PolymnesiaError(
            f"the Friedman test needs >= 2 {chosen} scored by every method, got {len(names)}"
        )
    ff, p = friedman(arr, higher_is_better)
    ranks = average_ranks(arr, higher_is_better)
    return FriedmanResult(
        blocks=chosen,
        block_names=names,
        methods=list(methods),
        scores=arr,
        statistic=ff,
        p=p,
        critical=friedman_critical(len(methods), len(names), alpha),
        ranks=dict(zip(methods, ranks.tolist(), strict=True)),
        cd=bonferroni_dunn_cd(len(methods), len(names), cd_alpha),
    )


# ------------------------------------------------------------------- multiplicity

Correction = Literal["holm", "benjamini-hochberg"]
CORRECTIONS: dict[str, str] = {
    "holm": "Holm's step-down correction (family-wise error rate)",
    "benjamini-hochberg": "the Benjamini-Hochberg correction (false discovery rate)",
}


def _adjusted(
    p_values: Sequence[float | None], on_sorted: Callable[[np.ndarray], np.ndarray]
) -> list[float]:
    """``on_sorted`` applied to the finite p-values sorted ascending, capped at 1, put back in
    the input order; NaN where no p-value was given (not in the family)."""
    p = np.array([np.nan if v is None else float(v) for v in p_values], dtype=float)
    ok = np.isfinite(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise PolymnesiaError(f"p-values must lie in [0, 1], got {p[ok].tolist()}")
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(ok)
    if idx.size:
        order = idx[np.argsort(p[idx], kind="stable")]
        out[order] = np.minimum(1.0, on_sorted(p[order]))
    return out.tolist()


def holm(p_values: Sequence[float | None]) -> list[float]:
    """Holm-adjusted p-values, in the input order (NaN or None: not in the family, NaN out).

    Sort the ``m`` finite p-values ascending, multiply the ``i``-th (from 0) by
    ``m - i``, take the running maximum and cap at 1 (Holm, "A Simple
    Sequentially Rejective Multiple Test Procedure", Scand. J. Statist. 6, 1979;
    R's ``p.adjust(p, "holm")``). Rejecting where the adjusted p is below alpha
    controls the family-wise error rate under any dependence between the tests.
    """
    return _adjusted(p_values, lambda q: np.maximum.accumulate((q.size - np.arange(q.size)) * q))


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order (NaN or None: left out).

    Sort the ``m`` finite p-values ascending, multiply the ``i``-th (from 1) by
    ``m / i``, take the running minimum from the largest down and cap at 1
    (Benjamini & Hochberg, JRSS B 57, 1995; R's ``p.adjust(p, "BH")``). Controls
    the false discovery rate for independent or positively dependent tests.
    """

    def step_up(q: np.ndarray) -> np.ndarray:
        return np.minimum.accumulate((q * q.size / np.arange(1, q.size + 1))[::-1])[::-1]

    return _adjusted(p_values, step_up)


def adjust_p(p_values: Sequence[float | None], method: Correction = "holm") -> list[float]:
    """Adjusted p-values by ``method`` ("holm" or "benjamini-hochberg")."""
    if method == "holm":
        return holm(p_values)
    if method == "benjamini-hochberg":
        return benjamini_hochberg(p_values)
    raise PolymnesiaError(f"unknown correction {method!r}; accepted: {', '.join(CORRECTIONS)}")
