"""Backward/forward transfer and forgetting on the accuracy matrix ``R`` (library conventions).

``R[i, j]`` is the score on language ``j`` after training step ``i``, 0-based,
rows and columns in learning order (see :mod:`polymnesia.metrics.continual`).
The libraries disagree on "forgetting": the four variants here differ only in
the rows the "best" score is taken over, and each is named after what it
computes:

* :func:`forgetting_after_learning`: avalanche (score right after learning);
* :func:`forgetting_best_since_learned`: best from learning to the step before last;
* :func:`forgetting_best_before_final`: Chaudhry et al. 2018 (RWalk), every row
  before the last, zero-shot rows included;
* :func:`forgetting_mammoth`: mammoth, the final row included (never negative).

Also GEM's BWT and FWT (Lopez-Paz & Ranzato 2017).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric


def _matrix(R: npt.ArrayLike, min_steps: int = 1) -> np.ndarray:
    """``R`` as a float ``[T, T]`` array, or a one-line error."""
    arr = np.asarray(R, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise PolymnesiaError(
            f"accuracy matrix R must be square [T, T] (steps x languages), got shape {arr.shape}"
        )
    if arr.shape[0] < min_steps:
        raise PolymnesiaError(
            f"this metric needs at least {min_steps} training steps, R has {arr.shape[0]}"
        )
    return arr


@register_metric(
    "bwt_gem",
    higher_is_better=True,
    description=(
        "GEM backward transfer: mean final minus just-learned score (Lopez-Paz & Ranzato 2017)"
    ),
)
def bwt_gem(R: npt.ArrayLike) -> float:
    """GEM backward transfer (Lopez-Paz & Ranzato 2017, eq. 2 of their section 4).

    ``BWT = 1/(T-1) sum_{i=1}^{T-1} (R_{T,i} - R_{i,i})``; 0-based
    ``mean over i = 0..T-2 of R[T-1, i] - R[i, i]``. Also mammoth's BWT and
    avalanche's ``-forgetting``; equal to :func:`cbt` with ``row="last"``.
    """
    arr = _matrix(R, min_steps=2)
    T = arr.shape[0]
    return float(np.mean(arr[T - 1, : T - 1] - np.diag(arr)[: T - 1]))


def _forgetting(R: npt.ArrayLike, first_row: Literal["learned", "zero"], last_row: int) -> float:
    """``mean over j < T-1 of max_{l in rows} R[l, j] - R[T-1, j]``.

    ``rows`` run from ``j`` (``first_row="learned"``) or 0 (``"zero"``) to
    ``T-1+last_row`` inclusive (``last_row`` 0: the final row, -1: the one before).
    """
    arr = _matrix(R, min_steps=2)
    T = arr.shape[0]
    best = [arr[(j if first_row == "learned" else 0) : T + last_row, j].max() for j in range(T - 1)]
    return float(np.mean(np.asarray(best) - arr[T - 1, : T - 1]))


@register_metric(
    "forgetting_after_learning",
    higher_is_better=False,
    description=(
        "mean of (score right after learning - final score) over earlier languages (avalanche)"
    ),
)
def forgetting_after_learning(R: npt.ArrayLike) -> float:
    """Forgetting as avalanche defines it: ``mean over j < T-1 of R[j, j] - R[T-1, j]``.

    The score right after learning each earlier language minus its final
    score (0-based); equals ``-bwt_gem(R)``. Can be negative.
    """
    return -bwt_gem(R)


@register_metric(
    "forgetting_best_since_learned",
    higher_is_better=False,
    description=(
        "mean of (best score from learning to the step before last - final score), earlier "
        "languages"
    ),
)
def forgetting_best_since_learned(R: npt.ArrayLike) -> float:
    """``mean over j < T-1 of max_{j <= l <= T-2} R[l, j] - R[T-1, j]``.

    The best score a language had after it was learned and before the final
    step, minus its final score. Chaudhry et al. 2018's rule restricted to
    the rows after the language was learned (zero-shot rows left out); can be
    negative when a language ends at its best.
    """
    return _forgetting(R, "learned", -1)


@register_metric(
    "forgetting_best_before_final",
    higher_is_better=False,
    description=(
        "mean of (best score in any row before the last - final score), earlier languages "
        "(Chaudhry et al. 2018)"
    ),
)
def forgetting_best_before_final(R: npt.ArrayLike) -> float:
    """Chaudhry et al. 2018 (RWalk), eq. 11: ``mean over j < T-1 of max_{0 <= l <= T-2} R[l, j] -
    R[T-1, j]``.

    The max runs over every row before the final one, so zero-shot scores
    measured before ``j`` was learned count too (they are part of ``R`` here).
    Can be negative.
    """
    return _forgetting(R, "zero", -1)


@register_metric(
    "forgetting_mammoth",
    higher_is_better=False,
    description=(
        "mean of (best score since learned, final row included - final score), earlier languages "
        "(mammoth; >= 0)"
    ),
)
def forgetting_mammoth(R: npt.ArrayLike) -> float:
    """mammoth's forgetting: ``mean over j < T-1 of max_{j <= l <= T-1} R[l, j] - R[T-1, j]``.

    mammoth (aimagelab/mammoth, ``utils/metrics.py: forgetting``) keeps for
    each step the scores of the tasks learned so far (zero-padded), takes
    the column max over ALL rows, the final one included, and subtracts the
    final row; averaged over every task but the last. Each term is therefore
    ``>= 0``. Rows before ``j`` was learned are not used: mammoth has no
    zero-shot scores there (only padding zeros, which never win for scores
    ``>= 0``).
    """
    return _forgetting(R, "learned", 0)


@register_metric(
    "fwt_vs_untrained",
    higher_is_better=True,
    description=(
        "GEM forward transfer: score before learning minus untrained score (Lopez-Paz & Ranzato "
        "2017)"
    ),
)
def fwt_vs_untrained(R: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """GEM forward transfer (Lopez-Paz & Ranzato 2017): ``1/(T-1) sum_{i=2}^{T} (R_{i-1,i} - b_i)``.

    ``b[j]`` is the score of the untrained (initial) model on language ``j``.
    0-based: ``mean over i = 1..T-1 of R[i-1, i] - b[i]``.
    """
    arr = _matrix(R, min_steps=2)
    base = np.asarray(b, dtype=float)
    if base.shape != (arr.shape[0],):
        raise PolymnesiaError(
            f"b must hold one untrained score per language ({arr.shape[0]}), got shape {base.shape}"
        )
    return float(np.mean(np.diag(arr, k=1) - base[1:]))
