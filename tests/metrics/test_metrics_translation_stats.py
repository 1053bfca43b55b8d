"""Per-sentence chrF/BLEU statistics: summed, they give sacrebleu's corpus scores exactly."""

from __future__ import annotations

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

from polymnesia.metrics.isotropy import self_similarity, self_similarity_by_word
from polymnesia.metrics.translation import (
    bleu,
    bleu_from_stats,
    chrf,
    chrf_from_stats,
    translation_statistics,
)

HYPS = ["the cat sat on the mat", "a dog", "", "In the beginning God created", "x y z w"]
REFS = [
    "the cat is on the mat",
    "the dog barks",
    "something",
    "In the beginning God created the heaven",
    "x y",
]


def test_summed_statistics_give_the_corpus_scores() -> None:
    st = np.asarray(translation_statistics(HYPS, REFS))
    assert st.shape == (5, 28)
    total = st.sum(axis=0, keepdims=True)
    assert chrf_from_stats(total)[0] == pytest.approx(chrf(HYPS, REFS), abs=1e-9)
    assert bleu_from_stats(total)[0] == pytest.approx(bleu(HYPS, REFS), abs=1e-9)
    chars = np.asarray(translation_statistics(HYPS, REFS, "char")).sum(axis=0, keepdims=True)
    assert bleu_from_stats(chars)[0] == pytest.approx(bleu(HYPS, REFS, tokenize="char"), abs=1e-9)


def test_vectorised_rules_match_sacrebleu_on_resamples_and_edge_cases() -> None:
    st = np.asarray(translation_statistics(HYPS, REFS))
    rng = np.random.default_rng(0)
    rows = [st[rng.integers(0, 5, rng.integers(1, 6))].sum(axis=0) for _ in range(400)]
    for r in rows[:100]:  # no correct n-gram of some order; no n-gram of some order at all
        r[20 + rng.integers(0, 4)] = 0
    for r in rows[100:140]:
        r[24 + rng.integers(0, 4)] = 0
    rows.append(np.zeros(28))
    batch = np.stack(rows)
    want_c = [CHRF()._compute_score_from_stats(list(r[:18])).score for r in batch]
    want_b = [BLEU()._compute_score_from_stats(list(r[18:])).score for r in batch]
    np.testing.assert_allclose(chrf_from_stats(batch), want_c, atol=1e-9)
    np.testing.assert_allclose(bleu_from_stats(batch), want_b, atol=1e-9)


def test_self_similarity_by_word_averages_to_self_similarity() -> None:
    rng = np.random.default_rng(1)
    H = rng.normal(size=(12, 4))
    words = [0, 1, 0, 2, 1, 0, 3, 2, 0, 1, 4, 4]
    sents = [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3]  # word 4 twice in one sentence: not scored
    ids, values = self_similarity_by_word(H, words, sents)
    assert list(ids) == [0, 1, 2]  # word 3 once, word 4 in one sentence only
    assert float(values.mean()) == pytest.approx(self_similarity(H, words, sents))
    u = H / np.linalg.norm(H, axis=1, keepdims=True)
    w2 = [i for i, w in enumerate(words) if w == 2]  # two occurrences in sentences 1 and 3
    assert values[2] == pytest.approx(float(u[w2[0]] @ u[w2[1]]))
