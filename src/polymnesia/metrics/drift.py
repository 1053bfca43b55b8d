"""Representation drift between two models on the same inputs (the two-phase CFT paper, section
4.4).

The two-phase CFT paper feeds the same English prompts (MT-Bench) to the model before and
after Phase 2 and compares "the mean hidden activations, for each model
layer": for a model with ``l`` layers, ``X in R^{l x d}`` holds, per layer,
the hidden state averaged over the ``n`` samples (each sample mean-pooled over
its tokens, :func:`polymnesia.evaluation.embeddings.layer_mean_states` then
:func:`mean_activations`). Then

* ``mu = 1/l sum_i X^(i)``, ``Xbar = X - mu``,
  ``Sigma = Xbar^T Xbar / (l - 1)`` in ``R^{d x d}`` (:func:`activation_covariance`);
* drift = the L2 norm of ``Sigma_1 - Sigma_2`` (:func:`covariance_drift`;
  Frobenius by default, ``ord="spectral"`` for the operator 2-norm: the paper
  says "L2-Norm of the difference of the matrices" without saying which).

Figure 2 plots this change *per layer*; the paper does not define the
per-layer quantity. :func:`layerwise_covariance_drift` splits ``Sigma`` into
its per-layer terms ``c_i c_i^T / (l - 1)`` (``c_i`` the centred row of layer
``i``; they sum to ``Sigma``) and reports the Frobenius norm of each term's
difference -- our reading, not the paper's formula. For per-layer similarity
on the individual samples we also give linear CKA (Kornblith et al. 2019) and
the cosine between the two models' mean activations of each layer.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric


def _mat(X: Any, what: str) -> np.ndarray:
    arr = np.asarray(X.detach().cpu().float() if hasattr(X, "detach") else X, dtype=np.float64)
    if arr.ndim != 2:
        raise PolymnesiaError(f"{what} must be a 2-D array, got shape {arr.shape}")
    return arr


def mean_activations(H: Any) -> np.ndarray:
    """``[l, n, d]`` per-sample layer states -> ``X [l, d]``, the mean over the ``n`` samples."""
    arr = np.asarray(H, dtype=np.float64)
    if arr.ndim != 3:
        raise PolymnesiaError(f"hidden states must be [layers, samples, d], got shape {arr.shape}")
    return arr.mean(axis=1)


def activation_covariance(X: Any) -> np.ndarray:
    """``Sigma = (X - mu)^T (X - mu) / (l - 1)`` over the ``l`` layer rows of ``X [l, d]``."""
    x = _mat(X, "X")
    if x.shape[0] < 2:
        raise PolymnesiaError(f"activation covariance needs >= 2 layers, got {x.shape[0]}")
    c = x - x.mean(axis=0, keepdims=True)
    return c.T @ c / (x.shape[0] - 1)


def _same_shape(X1: np.ndarray, X2: np.ndarray) -> None:
    if X1.shape != X2.shape:
        raise PolymnesiaError(
            f"the two models' activations differ in shape: {X1.shape} vs {X2.shape}"
        )


@register_metric(
    "covariance_drift",
    higher_is_better=False,
    description="the two-phase CFT paper, sec. 4.4: ||Sigma_1 - Sigma_2|| of layer-mean "
    "activation covariances",
)
def covariance_drift(X1: Any, X2: Any, ord: Literal["fro", "spectral"] = "fro") -> float:
    """L2 norm of the difference of the two models' activation covariances (the two-phase CFT paper,
    sec. 4.4)."""
    a, b = _mat(X1, "X1"), _mat(X2, "X2")
    _same_shape(a, b)
    diff = activation_covariance(a) - activation_covariance(b)
    if ord == "fro":
        return float(np.linalg.norm(diff, "fro"))
    if ord == "spectral":
        return float(np.linalg.norm(diff, 2))
    raise PolymnesiaError(f"covariance_drift ord must be 'fro' or 'spectral', got {ord!r}")


def layerwise_covariance_drift(X1: Any, X2: Any) -> np.ndarray:
    """Per layer ``i``: ``||c1_i c1_i^T - c2_i c2_i^T||_F / (l - 1)`` (see module docstring).

    Uses ``||uu^T - vv^T||_F^2 = |u|^4 + |v|^4 - 2 (u.v)^2``: no ``d x d`` matrix is built.
    """
    a, b = _mat(X1, "X1"), _mat(X2, "X2")
    _same_shape(a, b)
    ca, cb = a - a.mean(axis=0), b - b.mean(axis=0)
    na, nb = (ca * ca).sum(axis=1), (cb * cb).sum(axis=1)
    dot = (ca * cb).sum(axis=1)
    sq = np.maximum(na**2 + nb**2 - 2 * dot**2, 0.0)
    return np.asarray(np.sqrt(sq) / (a.shape[0] - 1))


@register_metric(
    "linear_cka",
    higher_is_better=True,
    description="linear CKA between two [n, d] representations of the same n inputs (1 = same)",
)
def linear_cka(A: Any, B: Any) -> float:
    """Linear CKA (Kornblith et al. 2019): ``||B^T A||_F^2 / (||A^T A||_F ||B^T B||_F)``,
    centred.
    """
    a, b = _mat(A, "A"), _mat(B, "B")
    if a.shape[0] != b.shape[0] or a.shape[0] < 2:
        raise PolymnesiaError(
            f"linear CKA needs the same n >= 2 inputs on both sides, got {a.shape[0]} and "
            f"{b.shape[0]}"
        )
    a, b = a - a.mean(axis=0), b - b.mean(axis=0)
    den = np.linalg.norm(a.T @ a, "fro") * np.linalg.norm(b.T @ b, "fro")
    return float(np.linalg.norm(b.T @ a, "fro") ** 2 / den) if den > 0 else 0.0


def layer_cosine(X1: Any, X2: Any) -> np.ndarray:
    """Per-layer cosine between two models' mean activations ``X [l, d]``."""
    a, b = _mat(X1, "X1"), _mat(X2, "X2")
    _same_shape(a, b)
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.asarray(np.where(den > 0, (a * b).sum(axis=1) / np.where(den > 0, den, 1), 0.0))
