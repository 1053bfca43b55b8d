"""Per-matrix layer scores: Spectrum SNR, relative change between checkpoints, random.

The two-phase CFT paper (section 5.2) freezes layers in Phase 2 chosen by three heuristics:

* LF_H1 -- random layers (:func:`random_scores` with a seed);
* LF_H2 -- the layers that changed most from the base model to the Phase 1
  model (:func:`relative_change`, streamed over two folders by
  :func:`most_changed_scan`);
* Spectrum (Hartford et al. 2024; the two-phase CFT paper, appendix D.1) -- the layers with
  the highest signal-to-noise ratio (:func:`spectrum_snr`, streamed by
  :func:`spectrum_scan`).

Spectrum SNR, as the reference code (cognitivecomputations/spectrum,
``spectrum.py``) computes it and reference-semantics.md states it: singular
values ``S`` of the weight in float32; ``sigma = IQR(S) / 1.349`` (the robust
normal-scale estimate); threshold ``eps = sigma * (1 + sqrt(beta))`` with
``beta = min(n, m) / max(n, m)`` (the upper Marchenko-Pastur edge of the
singular values, appendix D.1 eq. 1 up to the ``1/sqrt(N)`` scale, which the
IQR estimate of sigma already absorbs); ``SNR = sum(S > eps) / sum(S <= eps)``
divided by the largest singular value. A matrix with no noise singular value
has SNR ``inf`` as in the reference. The scans read one tensor at a time
(:mod:`polymnesia.layers.stream`), so no model is ever whole in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from polymnesia.layers.select import always_trainable
from polymnesia.layers.stream import (
    iter_module_tensors,
    iter_pairs,
    iter_pairs_with_module,
    iter_tensors,
)

#: IQR of a standard normal distribution (2 * 0.6745): sigma = IQR / 1.349
IQR_TO_SIGMA = 1.349


def iqr_sigma(S: torch.Tensor) -> float:
    """Robust scale ``(q75 - q25) / 1.349`` of the singular values (linear-interpolated
    quantiles).
    """
    s = S.float()
    return float((torch.quantile(s, 0.75) - torch.quantile(s, 0.25)) / IQR_TO_SIGMA)


def mp_threshold(sigma: float, n: int, m: int) -> float:
    """Marchenko-Pastur edge ``sigma * (1 + sqrt(beta))``, ``beta = min(n, m) / max(n, m)``."""
    beta = min(n, m) / max(n, m)
    return sigma * (1.0 + math.sqrt(beta))


def singular_values(W: torch.Tensor) -> torch.Tensor:
    """Singular values in float32, descending; a 1-D tensor is treated as one row (as Spectrum
    does).
    """
    w = W.detach().to(torch.float32)
    if w.ndim < 2:
        w = w.unsqueeze(0)
    elif w.ndim > 2:
        w = w.reshape(w.shape[0], -1)
    return torch.linalg.svdvals(w)


def snr_from_singular_values(S: torch.Tensor, n: int, m: int) -> float:
    """Spectrum's SNR ratio of one matrix from its singular values (see module docstring)."""
    threshold = mp_threshold(iqr_sigma(S), n, m)
    above = S.gt(threshold)
    signal = float(S[above].sum())
    noise = float(S[~above].sum())
    snr = signal / noise if noise != 0 else math.inf
    top = float(S.max())
    return snr / top if top > 0 else 0.0


def spectrum_snr(W: torch.Tensor) -> float:
    """Spectrum SNR of one weight matrix (float32 SVD on the CPU)."""
    S = singular_values(W)
    n, m = (1, W.shape[0]) if W.ndim < 2 else (W.shape[0], int(np.prod(W.shape[1:])))
    return snr_from_singular_values(S, n, m)


def relative_change(before: torch.Tensor, after: torch.Tensor) -> float:
    """``||after - before||_F / ||before||_F`` in float64 (LF_H2's "changed the most")."""
    a, b = before.detach().to(torch.float64), after.detach().to(torch.float64)
    denom = float(torch.linalg.vector_norm(a))
    diff = float(torch.linalg.vector_norm(b - a))
    return diff / denom if denom > 0 else (math.inf if diff > 0 else 0.0)


def spectrum_scan(
    source: str | Path | torch.nn.Module,
    *,
    pattern: str | None = None,
    include_embeddings: bool = False,
) -> dict[str, float]:
    """SNR of every weight matrix (``ndim >= 2``) of a safetensors folder or an in-memory model.

    A folder is streamed one tensor at a time; ``pattern`` (regex) narrows the
    scan. The input embeddings and LM head are skipped unless
    ``include_embeddings``: selection never picks them (Spectrum always leaves
    them trainable) and theirs are the largest (vocabulary-sized) SVDs.
    """
    stream: Iterable[tuple[str, torch.Tensor]]
    if isinstance(source, torch.nn.Module):
        stream = (
            (n, t) for n, t in iter_module_tensors(source) if pattern is None or _has(pattern, n)
        )
    else:
        stream = iter_tensors(source, pattern=pattern)
    return {
        name: spectrum_snr(t)
        for name, t in stream
        if include_embeddings or not always_trainable(name)
    }


def most_changed_scan(
    before: str | Path, after: str | Path | torch.nn.Module, *, pattern: str | None = None
) -> dict[str, float]:
    """Relative Frobenius change of every weight matrix from folder ``before`` to ``after``.

    Both folders are streamed (two tensors in memory at a time); ``after`` may
    also be the in-memory model (e.g. the Phase 1 model about to train in Phase 2).
    """
    if isinstance(after, torch.nn.Module):
        return {
            name: relative_change(b, a)
            for name, a, b in iter_pairs_with_module(after, before, pattern=pattern)
        }
    return {
        name: relative_change(a, b) for name, a, b in iter_pairs(before, after, pattern=pattern)
    }


def random_scores(names: Sequence[str], seed: int) -> dict[str, float]:
    """Uniform scores in [0, 1) from ``seed``, assigned in sorted-name order (deterministic)."""
    ordered = sorted(names)
    values = np.random.default_rng(seed).random(len(ordered))
    return {n: float(v) for n, v in zip(ordered, values, strict=True)}


def _has(pattern: str, name: str) -> bool:
    import re

    return re.search(pattern, name) is not None
