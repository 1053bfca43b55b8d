"""Representation drift between two models on the same inputs (paper 002, section 4.4).

Paper 002 feeds the same English prompts (MT-Bench) to the model before and
after Phase 2 and compares "the mean hidden activations, for each model
layer": for a model with ``l`` layers, ``X in R^{l x d}`` holds, per layer,
the hidden state averaged over the ``n`` samples (each sample mean-pooled over
its tokens, :func:`layer_mean_states` then :func:`mean_activations`). Then

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

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics import register_metric


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
    description="paper 002 sec. 4.4: ||Sigma_1 - Sigma_2|| of layer-mean activation covariances",
)
def covariance_drift(X1: Any, X2: Any, ord: Literal["fro", "spectral"] = "fro") -> float:
    """L2 norm of the difference of the two models' activation covariances (paper 002, sec. 4.4)."""
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
    """Linear CKA (Kornblith et al. 2019): ``||B^T A||_F^2 / (||A^T A||_F ||B^T B||_F)``, centred."""
    a, b = _mat(A, "A"), _mat(B, "B")
    if a.shape[0] != b.shape[0] or a.shape[0] < 2:
        raise PolymnesiaError(
            f"linear CKA needs the same n >= 2 inputs on both sides, got {a.shape[0]} and {b.shape[0]}"
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


@torch.no_grad()
def layer_mean_states(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_length: int = 128,
    batch_size: int = 16,
    include_embeddings: bool = False,
) -> np.ndarray:
    """``[layers, n, d]`` float32: each text's hidden states mean-pooled over its tokens, per layer.

    Layers are the decoder-layer outputs (``hidden_states[1:]``); with
    ``include_embeddings`` the embedding output comes first. BOS is prepended
    when the tokenizer has one; padding is masked out of the mean.
    """
    if not texts:
        raise PolymnesiaError("layer_mean_states needs at least one text")
    model.eval()
    device = next(model.parameters()).device
    bos, pad = tokenizer.bos_token_id, tokenizer.pad_token_id or 0
    enc = tokenizer(
        list(texts), add_special_tokens=False, truncation=True, max_length=max_length - 1
    )
    out: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        seqs = [
            ([bos] if bos is not None else []) + list(s)
            for s in enc["input_ids"][start : start + batch_size]
        ]
        if any(not s for s in seqs):
            raise PolymnesiaError("layer_mean_states: a text has no tokens and there is no BOS")
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, s in enumerate(seqs):
            ids[r, : len(s)], mask[r, : len(s)] = torch.tensor(s), 1
        hs = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True
        ).hidden_states
        layers = hs if include_embeddings else hs[1:]
        m = mask.to(device).unsqueeze(-1).float()
        pooled = torch.stack([(h.float() * m).sum(1) / m.sum(1) for h in layers])  # [L, b, d]
        out.append(pooled.cpu().numpy().astype(np.float32))
    return np.concatenate(out, axis=1)


def folder_layer_states(folder: str | Path, texts: Sequence[str], **kw: Any) -> np.ndarray:
    """:func:`layer_mean_states` for a polymnesia model folder (weights + tokenizer)."""
    from polymnesia.stages.common import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(Path(folder))
    return layer_mean_states(model, tokenizer, texts, **kw)
