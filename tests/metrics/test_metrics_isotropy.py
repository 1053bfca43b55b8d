"""Linear-time isotropy measures against brute-force O(n^2) computations."""

import numpy as np
import pytest
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.isotropy import (
    anisotropy_baseline,
    first_pc_variance_explained,
    intra_sentence_similarity,
    isotropy_report,
    mean_pairwise_cosine,
    mev_baseline,
    self_similarity,
)


def _cos(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _brute_pairwise(X):
    n = len(X)
    return np.mean([_cos(X[i], X[j]) for i in range(n) for j in range(n) if i != j])


def _data(seed=0, n=60, d=5):
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, d)) + 0.5  # shifted: cosines are far from zero
    word_ids = rng.integers(0, 8, n)
    sent_ids = np.repeat(np.arange(n // 6), 6)
    return H, word_ids, sent_ids


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pairwise_identity_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(7, 4))
    assert mean_pairwise_cosine(X) == pytest.approx(_brute_pairwise(X))


def test_self_similarity_matches_brute_force():
    H, words, _ = _data()
    words[0] = 99  # a word seen once is skipped
    expected = np.mean(
        [_brute_pairwise(H[words == w]) for w in np.unique(words) if (words == w).sum() >= 2]
    )
    assert self_similarity(H, words) == pytest.approx(expected)


def test_intra_sentence_similarity_matches_brute_force():
    H, _, sents = _data(seed=3)
    expected = np.mean(
        [
            np.mean([_cos(h, H[sents == s].mean(axis=0)) for h in H[sents == s]])
            for s in np.unique(sents)
        ]
    )
    assert intra_sentence_similarity(H, sents) == pytest.approx(expected)


def test_mev_matches_svd_including_words_with_more_occurrences_than_dims():
    H, words, _ = _data(seed=4, n=80, d=3)  # ~10 occurrences per word > d = 3
    words[:2] = [50, 50]  # a word with 2 occurrences < d
    expected = []
    for w in np.unique(words):
        X = H[words == w]
        if len(X) >= 2:
            s = np.linalg.svd(X, compute_uv=False)
            expected.append(s[0] ** 2 / np.sum(s**2))
    assert first_pc_variance_explained(H, words) == pytest.approx(np.mean(expected))


def test_identical_vectors_are_fully_anisotropic():
    H = np.tile([1.0, 2.0, 3.0], (6, 1))
    assert self_similarity(H, [0, 0, 0, 1, 1, 1]) == pytest.approx(1.0)
    assert first_pc_variance_explained(H, [0, 0, 0, 1, 1, 1]) == pytest.approx(1.0)
    assert anisotropy_baseline(H, n_pairs=50) == pytest.approx(1.0)


def test_baseline_is_seeded_and_close_to_all_pairs_mean():
    H, _, _ = _data(seed=5, n=40)
    a = anisotropy_baseline(H, n_pairs=20_000, seed=1)
    assert a == anisotropy_baseline(H, n_pairs=20_000, seed=1)
    assert a == pytest.approx(_brute_pairwise(H), abs=0.01)


def test_report_adjusts_by_the_baselines_and_accepts_tensors():
    H, words, sents = _data(seed=6)
    rep = isotropy_report(torch.tensor(H), torch.tensor(words), torch.tensor(sents), seed=0)
    assert rep["self_similarity"] == pytest.approx(self_similarity(H, words))
    assert rep["self_similarity_adjusted"] == pytest.approx(
        rep["self_similarity"] - anisotropy_baseline(H, seed=0)
    )
    assert rep["intra_sentence_similarity_adjusted"] == pytest.approx(
        rep["intra_sentence_similarity"] - rep["anisotropy_baseline"]
    )
    assert rep["first_pc_variance_explained_adjusted"] == pytest.approx(
        rep["first_pc_variance_explained"] - mev_baseline(H, seed=0)
    )


def test_bad_inputs_raise_one_line():
    H, words, _ = _data()
    with pytest.raises(PolymnesiaError, match="one id per row"):
        self_similarity(H, words[:-1])
    with pytest.raises(PolymnesiaError, match=">= 2 occurrences"):
        self_similarity(H, np.arange(len(H)))
    with pytest.raises(PolymnesiaError, match="all-zero"):
        self_similarity(np.zeros((3, 2)), [0, 0, 0])
