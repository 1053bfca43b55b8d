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
    words_in_two_sentences,
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


def _brute_cross_sentence(H, words, sents):
    """Ethayarajh's Definition 1 by brute force: pairs of occurrences in different sentences."""
    per_word = []
    for w in np.unique(words):
        idx = np.flatnonzero(words == w)
        cos = [_cos(H[i], H[j]) for i in idx for j in idx if sents[i] != sents[j]]
        if cos:
            per_word.append(np.mean(cos))
    return np.mean(per_word)


def test_self_similarity_matches_brute_force_over_different_sentences():
    H, words, sents = _data()
    words[0] = 99  # a word seen once is skipped
    words[[6, 7]] = 98  # seen twice but in ONE sentence (rows 6, 7 are sentence 1): skipped
    assert self_similarity(H, words, sents) == pytest.approx(_brute_cross_sentence(H, words, sents))
    # without sentence ids every row is its own context: all pairs of a word count
    expected = np.mean(
        [_brute_pairwise(H[words == w]) for w in np.unique(words) if (words == w).sum() >= 2]
    )
    assert self_similarity(H, words) == pytest.approx(expected)


def test_pairs_inside_one_sentence_are_not_contexts_by_hand():
    # word 0: rows 0, 1 in sentence 0 (identical vectors), row 2 in sentence 1 (orthogonal).
    # All pairs: (1 + 0 + 0) / 3; different sentences only: 0. Word 1 in one sentence: skipped.
    H = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, -1.0]])
    words, sents = [0, 0, 0, 1, 1], [0, 0, 1, 1, 1]
    assert self_similarity(H, words, sents) == pytest.approx(0.0)
    assert self_similarity(H[:3], words[:3]) == pytest.approx(1 / 3)
    np.testing.assert_array_equal(words_in_two_sentences(words, sents), [1, 1, 1, 0, 0])
    # MEV of word 0's rows only: s = (sqrt 2, 1) -> 2 / 3
    assert first_pc_variance_explained(H, words, sents) == pytest.approx(2 / 3)


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
    assert self_similarity(H, [0, 0, 0, 1, 1, 1], [0, 1, 2, 0, 1, 2]) == pytest.approx(1.0)
    assert first_pc_variance_explained(H, [0, 0, 0, 1, 1, 1]) == pytest.approx(1.0)
    assert anisotropy_baseline(H, n_pairs=50) == pytest.approx(1.0)


def test_baseline_is_seeded_and_close_to_the_mean_over_different_sentence_pairs():
    H, _, sents = _data(seed=5, n=42)
    a = anisotropy_baseline(H, sents, n_pairs=40_000, seed=1)
    assert a == anisotropy_baseline(H, sents, n_pairs=40_000, seed=1)
    n = len(H)
    cross = [_cos(H[i], H[j]) for i in range(n) for j in range(n) if sents[i] != sents[j]]
    assert a == pytest.approx(np.mean(cross), abs=0.01)


def test_baseline_never_pairs_vectors_of_one_sentence():
    # sentence 0 holds two identical vectors, sentence 1 one orthogonal to them:
    # every pair from different sentences has cosine 0, same-sentence pairs 1.
    H = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert anisotropy_baseline(H, [0, 0, 1], n_pairs=500) == pytest.approx(0.0)
    with pytest.raises(PolymnesiaError, match=">= 2 sentences"):
        anisotropy_baseline(H, [0, 0, 0])


def test_report_adjusts_by_the_baselines_and_accepts_tensors():
    H, words, sents = _data(seed=6)
    rep = isotropy_report(torch.tensor(H), torch.tensor(words), torch.tensor(sents), seed=0)
    assert rep["self_similarity"] == pytest.approx(self_similarity(H, words, sents))
    assert rep["self_similarity_adjusted"] == pytest.approx(
        rep["self_similarity"] - anisotropy_baseline(H, sents, seed=0)
    )
    assert rep["first_pc_variance_explained"] == pytest.approx(
        first_pc_variance_explained(H, words, sents)
    )
    assert rep["occurrences_scored"] == words_in_two_sentences(words, sents).sum()
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
    with pytest.raises(PolymnesiaError, match=">= 2 sentences"):
        self_similarity(H, np.arange(len(H)))
    with pytest.raises(PolymnesiaError, match=">= 2 sentences"):
        self_similarity(H, np.zeros(len(H)), np.zeros(len(H)))
    with pytest.raises(PolymnesiaError, match="all-zero"):
        self_similarity(np.zeros((3, 2)), [0, 0, 0])
