"""Representation drift (the two-phase CFT paper, sec. 4.4): covariance of layer-mean activations,
CKA, states."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from metrics_model_helpers import TEXTS, model_folder

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.embeddings import folder_layer_states, layer_mean_states
from polymnesia.metrics import METRICS
from polymnesia.metrics.drift import (
    activation_covariance,
    covariance_drift,
    layer_cosine,
    layerwise_covariance_drift,
    linear_cka,
    mean_activations,
)

X1 = np.array([[1.0, 0.0], [3.0, 0.0]])  # mu = [2, 0], centred rows [-1, 0], [1, 0]
X2 = np.array([[0.0, 1.0], [0.0, 3.0]])


def test_covariance_hand() -> None:
    assert activation_covariance(X1) == pytest.approx(np.array([[2.0, 0.0], [0.0, 0.0]]))
    assert covariance_drift(X1, X1) == 0.0
    # Sigma1 - Sigma2 = diag(2, -2): Frobenius sqrt(8), spectral 2
    assert covariance_drift(X1, X2) == pytest.approx(math.sqrt(8))
    assert covariance_drift(X1, X2, ord="spectral") == pytest.approx(2.0)


def test_layerwise_terms_match_explicit_matrices() -> None:
    assert layerwise_covariance_drift(X1, X2) == pytest.approx([math.sqrt(2)] * 2)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    ca, cb = a - a.mean(0), b - b.mean(0)
    explicit = [
        np.linalg.norm(np.outer(ca[i], ca[i]) - np.outer(cb[i], cb[i])) / 4 for i in range(5)
    ]
    assert layerwise_covariance_drift(a, b) == pytest.approx(explicit)


def test_mean_activations_and_errors() -> None:
    H = np.arange(12, dtype=float).reshape(2, 3, 2)
    assert mean_activations(H) == pytest.approx(np.array([[2.0, 3.0], [8.0, 9.0]]))
    with pytest.raises(PolymnesiaError, match=">= 2 layers"):
        activation_covariance(X1[:1])
    with pytest.raises(PolymnesiaError, match="differ in shape"):
        covariance_drift(X1, np.ones((3, 2)))


def test_linear_cka() -> None:
    rng = np.random.default_rng(0)
    A = rng.normal(size=(40, 6))
    Q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    assert linear_cka(A, 3.0 * A @ Q + 1.0) == pytest.approx(1.0)  # rotation, scale, shift
    assert linear_cka(A, rng.normal(size=(40, 6))) < 0.5
    with pytest.raises(PolymnesiaError, match="same n"):
        linear_cka(A, A[:10])


def test_layer_cosine() -> None:
    assert layer_cosine(X1, X2) == pytest.approx([0.0, 0.0])
    assert layer_cosine(X1, 2 * X1) == pytest.approx([1.0, 1.0])


def test_registered() -> None:
    assert not METRICS.get("covariance_drift").higher_is_better
    assert METRICS.get("linear_cka").higher_is_better


def test_layer_mean_states_padding_free(tmp_path: Path) -> None:
    from polymnesia.models.io import load_model_and_tokenizer

    folder = model_folder(tmp_path / "m", layers=3)
    model, tok = load_model_and_tokenizer(folder)
    texts = [TEXTS[1], TEXTS[0]]  # different lengths: the short one is padded in a batch
    batched = layer_mean_states(model, tok, texts, batch_size=2)
    alone = layer_mean_states(model, tok, texts, batch_size=1)
    assert batched.shape == (3, 2, 16)
    assert batched == pytest.approx(alone, abs=1e-5)
    with_emb = layer_mean_states(model, tok, texts, include_embeddings=True)
    assert with_emb.shape == (4, 2, 16) and with_emb[1:] == pytest.approx(batched, abs=1e-5)
    same = folder_layer_states(folder, TEXTS[:6])
    other = folder_layer_states(model_folder(tmp_path / "o", seed=1, layers=3), TEXTS[:6])
    Xa, Xb = mean_activations(same), mean_activations(other)
    assert covariance_drift(Xa, Xa) == 0.0 and covariance_drift(Xa, Xb) > 0.0
