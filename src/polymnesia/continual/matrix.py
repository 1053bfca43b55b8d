"""The accuracy matrix R of Khelli et al. 2025 (section 3.3): build it from score records, compose
it, store
it.

``R[i, j]`` is the score on language ``order[j]`` after training step ``i``
(0-based; rows and columns in the learning order, the layout
:mod:`polymnesia.metrics.continual` expects).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from polymnesia.errors import DataError
from polymnesia.io import atomic_write_bytes, atomic_write_csv
from polymnesia.results import Score

V = TypeVar("V")


def sequential_matrix(scores: Sequence[Score], order: Sequence[str]) -> np.ndarray:
    """R from the scores of one sequential arm in one order (``step`` = row, ``lang`` = column)."""
    T = len(order)
    R = np.full((T, T), np.nan)
    pos = {lang: j for j, lang in enumerate(order)}
    for s in scores:
        if s.step is not None and s.step < T and s.lang in pos:
            R[s.step, pos[s.lang]] = s.value
    if np.isnan(R).any():
        missing = int(np.isnan(R).sum())
        raise DataError(
            f"accuracy matrix for order {list(order)} misses {missing} of {T * T} scores"
        )
    return R


def independent_cells(cross: Mapping[str, Mapping[str, V]], order: Sequence[str]) -> list[list[V]]:
    """The entries of R for MONO / NON-SHARED LoRA, as objects (scores or item sets).

    ``cross[a][j]`` belongs to language ``j`` under the model trained on ``a``
    alone; see :func:`compose_independent` for the layout.
    """
    return [
        [cross[lang][lang] if j <= i else cross[order[i]][lang] for j, lang in enumerate(order)]
        for i in range(len(order))
    ]


def compose_independent(
    cross: Mapping[str, Mapping[str, float]], order: Sequence[str]
) -> np.ndarray:
    """R for MONO / NON-SHARED LoRA from their cross scores (004 eqs. 2-3, 6).

    ``cross[a][j]`` is the score on language ``j`` of the model trained on ``a``
    alone. After step ``i`` a learned language (``j <= i``) is scored with its
    own model; a language not learned yet with the model of the language just
    learned (``order[i]``), its zero-shot transfer. Rows below the diagonal are
    therefore constant down each column: these methods cannot forget.
    """
    return np.array(independent_cells(cross, order), dtype=float)


def joint_cells(row: Mapping[str, V], order: Sequence[str]) -> list[list[V]]:
    """The entries of R for MULTI, as objects: the same row after every step."""
    return [[row[lang] for lang in order] for _ in order]


def compose_joint(row: Mapping[str, float], order: Sequence[str]) -> np.ndarray:
    """R for MULTI (004 eq. 1): one model trained on all languages, the same row after every
    step.
    """
    return np.array(joint_cells(row, order), dtype=float)


def save_matrix(R: np.ndarray, order: Sequence[str], path_stem: Path) -> tuple[Path, Path]:
    """``STEM.csv`` (header: step, trained, then the languages) and ``STEM.npy``."""
    rows = [[str(i), order[i], *[f"{v:.6f}" for v in R[i]]] for i in range(len(order))]
    csv_path, npy_path = path_stem.with_suffix(".csv"), path_stem.with_suffix(".npy")
    atomic_write_csv(csv_path, ["step", "trained", *order], rows)
    buf = io.BytesIO()
    np.save(buf, R)
    atomic_write_bytes(npy_path, buf.getvalue())
    return csv_path, npy_path
