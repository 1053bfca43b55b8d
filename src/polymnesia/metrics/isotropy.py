"""Isotropy of contextual representations (Ethayarajh 2019), in time linear in the tokens.

Ethayarajh, "How Contextual are Contextualized Word Representations?" (EMNLP
2019; code kawine/contextual) defines, for one layer:

* self-similarity of a word: mean cosine between its vectors in different
  contexts, a context being a different sentence (Definition 1), averaged
  over words that occur in at least two sentences;
* intra-sentence similarity: mean cosine of each word vector to its
  sentence's mean vector (Definition 2), averaged over sentences;
* maximum explainable variance (MEV): share of the variance of a word's
  occurrence matrix explained by its first principal component (Definition 3),
  averaged over the same words as self-similarity;
* anisotropy baselines: the same quantities for randomly sampled word
  vectors from different sentences; reported values are adjusted by
  subtracting them.

Aggarwal et al. 2024 (Table 2) reports self-similarity by language group, lower is better.

Inputs: ``H [N, d]`` holds one vector per word OCCURRENCE (pool the
sub-tokens of a word first: :func:`polymnesia.evaluation.representations.contextual_vectors`),
``word_ids [N]`` the word type of each occurrence, ``sent_ids [N]`` its
sentence. Pairs inside one sentence never count as "different contexts".
Nothing here builds an N x N matrix: the sum of cosines over pairs of unit
vectors from different sentences is ``||sum u||^2 - sum_s ||sum_{u in s} u||^2``
(all pairs minus same-sentence pairs), so one pass of group sums suffices
(:func:`mean_pairwise_cosine` is the one-sentence-per-vector case).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import register_metric

try:  # torch is a dependency, but isotropy maths does not need it
    import torch

    _TORCH_OK: tuple[Any, ...] = (torch.float32, torch.float64)
except ImportError:  # pragma: no cover
    _TORCH_OK = ()


CHUNK = 8192  # rows per block: temporaries stay small, so the cost stays linear in N


def _vectors(H: Any) -> np.ndarray:
    """``H`` as a 2-D float array, keeping float32 (blocks are upcast to float64 one at a time)."""
    if hasattr(H, "detach"):  # a torch tensor
        H = H.detach().cpu()
        H = (H.float() if not H.is_floating_point() or H.dtype not in _TORCH_OK else H).numpy()
    arr = np.asarray(H)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if arr.ndim != 2 or arr.shape[0] < 2:
        raise PolymnesiaError(f"H must be [N, d] with N >= 2 token vectors, got shape {arr.shape}")
    return arr


def _ids(ids: Any, n: int, what: str) -> np.ndarray:
    if hasattr(ids, "detach"):
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.shape != (n,):
        raise PolymnesiaError(f"{what} must hold one id per row of H ({n}), got shape {arr.shape}")
    return arr


def _unit(H: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, in float64."""
    X = np.asarray(H, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise PolymnesiaError("H has an all-zero vector; cosine similarity is undefined for it")
    return X / norms


def _group_sums(
    H: np.ndarray, ids: np.ndarray, normalise: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-group sums of H's rows (unit rows if ``normalise``), group sizes, each row's group.

    Rows are read in blocks of :data:`CHUNK`, in their own order (sequential
    memory access), and scattered into the float64 result with ``np.add.at``.
    """
    _, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    sums = np.zeros((len(counts), H.shape[1]))
    for a in range(0, len(inverse), CHUNK):
        block = H[a : a + CHUNK]
        np.add.at(
            sums, inverse[a : a + CHUNK], _unit(block) if normalise else block.astype(np.float64)
        )
    return sums, counts, inverse


def mean_pairwise_cosine(U: npt.ArrayLike) -> float:
    """Mean cosine over distinct pairs of ``U``'s rows: ``(||sum u||^2 - n) / (n(n-1))`` on unit
    rows.
    """
    unit = _unit(_vectors(U))
    n = unit.shape[0]  # small inputs only: no blocking
    total = unit.sum(axis=0)
    return float((total @ total - n) / (n * (n - 1)))


def _cross_sentence_groups(
    X: np.ndarray, word_ids: Any, sent_ids: Any | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per word: ``||sum u||^2``, its occurrence count n, ``sum_s ||sum_s u||^2``,
    ``sum_s n_s^2``; and each occurrence's word group index.

    ``sent_ids=None`` puts every row in its own sentence.
    """
    words = _ids(word_ids, len(X), "word_ids")
    sents = np.arange(len(X)) if sent_ids is None else _ids(sent_ids, len(X), "sent_ids")
    sums, counts, inverse = _group_sums(X, words, normalise=True)
    sent_index = np.unique(sents, return_inverse=True)[1].reshape(-1)
    n_sents = int(sent_index.max()) + 1
    keys = inverse.astype(np.int64) * n_sents + sent_index  # one key per (word, sentence)
    ws_sums, ws_counts, _ = _group_sums(X, keys, normalise=True)
    ws_word = np.unique(keys) // n_sents
    same_sq = np.bincount(ws_word, np.einsum("gd,gd->g", ws_sums, ws_sums), len(counts))
    same_n2 = np.bincount(ws_word, ws_counts.astype(np.float64) ** 2, len(counts))
    return np.einsum("gd,gd->g", sums, sums), counts.astype(np.float64), same_sq, same_n2


def words_in_two_sentences(word_ids: Any, sent_ids: Any) -> np.ndarray:
    """Boolean mask over occurrences: the word occurs in at least two different sentences."""
    words, sents = np.asarray(word_ids), np.asarray(sent_ids)
    pairs = np.unique(np.stack([words, sents], axis=1), axis=0)
    types, n_sent = np.unique(pairs[:, 0], return_counts=True)
    return np.isin(words, types[n_sent >= 2])


@register_metric(
    "self_similarity",
    higher_is_better=False,
    description=(
        "mean cosine between a word's vectors in different sentences, averaged over words "
        "(Ethayarajh 2019)"
    ),
    title="self-similarity",
)
def self_similarity(H: Any, word_ids: Any, sent_ids: Any | None = None) -> float:
    """Self-similarity (Ethayarajh 2019, Definition 1), averaged over words.

    Per word: mean cosine over pairs of its occurrences that lie in different
    sentences (``sent_ids``), computed from group sums of unit vectors; words
    occurring in fewer than two sentences are skipped; then the unweighted
    mean over words. ``sent_ids=None`` treats every row as its own sentence
    (every pair of rows counts).
    """
    return float(np.mean(self_similarity_by_word(H, word_ids, sent_ids)[1]))


def self_similarity_by_word(
    H: Any, word_ids: Any, sent_ids: Any | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The words :func:`self_similarity` scores (ids, sorted) and each one's self-similarity.

    Their unweighted mean is :func:`self_similarity`; a report resamples them
    for an interval over words.
    """
    X = _vectors(H)
    sq, n, same_sq, same_n2 = _cross_sentence_groups(X, word_ids, sent_ids)
    pairs = n**2 - same_n2  # ordered pairs from different sentences
    keep = pairs > 0
    if not keep.any():
        raise PolymnesiaError("self-similarity needs at least one word seen in >= 2 sentences")
    types = np.unique(_ids(word_ids, len(X), "word_ids"))
    return types[keep], (sq[keep] - same_sq[keep]) / pairs[keep]


@register_metric(
    "intra_sentence_similarity",
    higher_is_better=False,
    description="mean cosine of each token vector to its sentence's mean vector (Ethayarajh 2019)",
    title="intra-sentence similarity",
)
def intra_sentence_similarity(H: Any, sent_ids: Any) -> float:
    """Intra-sentence similarity (Ethayarajh 2019, Definition 2), averaged over sentences.

    Per sentence ``s``: ``1/n sum_i cos(h_i, mean_s)`` with ``mean_s`` the mean
    of the raw (not normalised) token vectors of ``s``.
    """
    X = _vectors(H)
    sums, counts, inverse = _group_sums(X, _ids(sent_ids, len(X), "sent_ids"), normalise=False)
    mean_unit = _unit(sums)  # direction of each sentence mean
    cos = np.empty(len(X))
    for a in range(0, len(X), CHUNK):
        b = a + CHUNK
        cos[a:b] = np.einsum("nd,nd->n", _unit(X[a:b]), mean_unit[inverse[a:b]])
    per_sentence = np.bincount(inverse, weights=cos, minlength=len(counts)) / counts
    return float(per_sentence.mean())


def _mev_groups(X: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """First-singular-value share ``s_1^2 / sum s_i^2`` of each group with >= 2 rows."""
    order = np.argsort(ids, kind="stable")
    _, starts, counts = np.unique(ids[order], return_index=True, return_counts=True)
    out: list[np.ndarray] = []
    d = X.shape[1]
    for c in np.unique(counts[counts >= 2]):
        rows = order[starts[counts == c][:, None] + np.arange(c)]  # [G, c]
        G = X[rows].astype(np.float64)  # [G, c, d]
        gram = G @ G.transpose(0, 2, 1) if c <= d else G.transpose(0, 2, 1) @ G
        eig = np.linalg.eigvalsh(gram)  # ascending, [G, min(c, d)]
        out.append(eig[:, -1] / np.einsum("gcd,gcd->g", G, G))
    return np.concatenate(out) if out else np.empty(0)


@register_metric(
    "first_pc_variance_explained",
    higher_is_better=False,
    description=(
        "share of a word's occurrence-matrix variance on its first principal component "
        "(Ethayarajh 2019 MEV)"
    ),
    title="first-PC variance explained",
)
def first_pc_variance_explained(H: Any, word_ids: Any, sent_ids: Any | None = None) -> float:
    """Maximum explainable variance (Ethayarajh 2019, Definition 3), averaged over words.

    For a word with occurrence matrix ``X_w [n, d]`` and singular values
    ``s_i``: ``MEV(w) = s_1^2 / sum_i s_i^2``, on the UNcentred matrix as the
    paper defines it (so "principal component" is the top singular direction).
    Only words occurring in at least two different sentences (``sent_ids``;
    ``None``: every row its own sentence) are scored, the words
    :func:`self_similarity` scores; all their occurrences form ``X_w``. Cost
    per word is ``O(n min(n, d)^2)``, in batches of words with equal counts.
    """
    X = _vectors(H)
    words = _ids(word_ids, len(X), "word_ids")
    if sent_ids is not None:
        keep = words_in_two_sentences(words, _ids(sent_ids, len(X), "sent_ids"))
        X, words = X[keep], words[keep]
    mev = _mev_groups(X, words)
    if mev.size == 0:
        raise PolymnesiaError("MEV needs at least one word seen in >= 2 sentences")
    return float(mev.mean())


def anisotropy_baseline(
    H: Any, sent_ids: Any | None = None, n_pairs: int = 10_000, seed: int = 0
) -> float:
    """Mean cosine of ``n_pairs`` random pairs of word vectors from different sentences.

    Ethayarajh 2019, section 3.4: "uniformly randomly sampled words from
    different contexts". Each pair draws two rows uniformly and redraws the
    second while it lies in the first's sentence (``sent_ids=None``: any two
    distinct rows).
    """
    X = _vectors(H)
    if n_pairs < 1:
        raise PolymnesiaError(f"n_pairs must be >= 1, got {n_pairs}")
    sents = np.arange(len(X)) if sent_ids is None else _ids(sent_ids, len(X), "sent_ids")
    if len(np.unique(sents)) < 2:
        raise PolymnesiaError("the anisotropy baseline needs vectors from >= 2 sentences")
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(X), n_pairs)
    j = rng.integers(0, len(X), n_pairs)
    while (same := sents[i] == sents[j]).any():
        j[same] = rng.integers(0, len(X), int(same.sum()))
    return float(np.einsum("nd,nd->n", _unit(X[i]), _unit(X[j])).mean())


def mev_baseline(H: Any, sample_size: int = 1000, seed: int = 0) -> float:
    """MEV of ``sample_size`` uniformly sampled occurrences: the baseline for MEV (Ethayarajh 2019).

    The value depends on the sample size (fewer rows, larger share); the
    default 1000 is our choice, the paper does not state one.
    """
    X = _vectors(H)
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(X), size=min(sample_size, len(X)), replace=False)
    return float(_mev_groups(X[rows], np.zeros(len(rows), dtype=np.int64))[0])


def anisotropy_adjusted(raw: float, baseline: float) -> float:
    """A raw isotropy measure minus its anisotropy baseline: the value Ethayarajh 2019
    reports (:func:`isotropy_report`)."""
    return float(raw) - float(baseline)


for _name, _title, _baseline in (
    ("self_similarity", "self-similarity (anisotropy-adjusted)", "anisotropy_baseline"),
    ("intra_sentence_similarity", "intra-sentence similarity (adjusted)", "anisotropy_baseline"),
    ("first_pc_variance_explained", "first-PC variance explained (adjusted)", "mev_baseline"),
):
    register_metric(
        f"{_name}_adjusted",
        higher_is_better=False,
        description=f"{_name} minus {_baseline} (Ethayarajh 2019's reported value)",
        title=_title,
    )(anisotropy_adjusted)


def isotropy_report(
    H: Any, word_ids: Any, sent_ids: Any, seed: int = 0, n_pairs: int = 10_000
) -> dict[str, float]:
    """All isotropy measures, raw and anisotropy-adjusted (adjusted = raw - baseline).

    Rows of ``H`` are word occurrences. Self-similarity and intra-sentence
    similarity are adjusted by the cosine of random word pairs from different
    sentences (:func:`anisotropy_baseline`), MEV by :func:`mev_baseline`, as
    Ethayarajh 2019 reports them; ``words_scored`` / ``occurrences_scored``
    count the word types seen in >= 2 sentences and their occurrences.
    """
    X = _vectors(H)
    base = anisotropy_baseline(X, sent_ids, n_pairs, seed)
    base_mev = mev_baseline(X, seed=seed)
    raw = {
        "self_similarity": self_similarity(X, word_ids, sent_ids),
        "intra_sentence_similarity": intra_sentence_similarity(X, sent_ids),
        "first_pc_variance_explained": first_pc_variance_explained(X, word_ids, sent_ids),
    }
    scored = words_in_two_sentences(
        _ids(word_ids, len(X), "word_ids"), _ids(sent_ids, len(X), "sent_ids")
    )
    report = dict(
        raw,
        anisotropy_baseline=base,
        mev_baseline=base_mev,
        words_scored=float(len(np.unique(np.asarray(word_ids)[scored]))),
        occurrences_scored=float(scored.sum()),
    )
    report["self_similarity_adjusted"] = raw["self_similarity"] - base
    report["intra_sentence_similarity_adjusted"] = raw["intra_sentence_similarity"] - base
    report["first_pc_variance_explained_adjusted"] = raw["first_pc_variance_explained"] - base_mev
    return report
