"""New-token initialisations (polymnesia.models.new_tokens) on hand-checkable inputs.

Old rows (d = 2) of a 5-token base vocabulary a, b, c, d, bc; the merged vocabulary adds
ab (5), abc (6), zz (7). Every expected value below is worked out by hand in its comment.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.models.new_tokens import (
    INITS,
    Alignment,
    NewTokens,
    StaticEmbeddings,
    focus_weights,
    ibm1_alignment,
    initialise,
    normal_init,
    omp,
    procrustes,
    sparsemax,
    sparsemax_topk,
    static_embeddings,
    wechsel_weights,
)

OLD = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, 3.0], [2.0, 0.0]])
BASE_VOCAB = ["a", "b", "c", "d", "bc"]
MERGED_VOCAB = [*BASE_VOCAB, "ab", "abc", "zz"]


class Tok:
    """A greedy longest-match tokenizer with the API the initialisations use."""

    def __init__(self, vocab: list[str]) -> None:
        self.vocab = vocab

    def __len__(self) -> int:
        return len(self.vocab)

    def convert_ids_to_tokens(self, i: int) -> str:
        return self.vocab[i]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def _encode(self, text: str) -> list[int]:
        ids, i = [], 0
        while i < len(text):
            for j in range(len(text), i, -1):
                if text[i:j] in self.vocab:
                    ids.append(self.vocab.index(text[i:j]))
                    i = j
                    break
            else:
                i += 1  # unknown character: no token
        return ids

    def __call__(
        self, texts: list[str], add_special_tokens: bool = False
    ) -> dict[str, list[list[int]]]:
        return {"input_ids": [self._encode(t) for t in texts]}


def tokens(**kw: object) -> NewTokens:
    return NewTokens(Tok(BASE_VOCAB), Tok(MERGED_VOCAB), 5, (5, 6, 7), **kw)  # type: ignore[arg-type]


def test_registry_has_every_method() -> None:
    assert {"mean", "subtoken_mean", "normal", "focus", "omp", "align", "wechsel"} <= set(
        INITS.names()
    )
    assert INITS.get("wechsel").needs == {"static", "source_static"}
    assert INITS.get("focus").needs == {"static"} and INITS.get("align").needs == {"alignment"}


def test_mean() -> None:
    rows = initialise("mean", OLD, tokens())
    assert torch.equal(rows, torch.tensor([[1.4, 1.0]] * 3))  # (1+0+1+3+2)/5, (0+1+1+3+0)/5


def test_subtoken_mean() -> None:
    rows = initialise("subtoken_mean", OLD, tokens())
    assert torch.allclose(rows[0], torch.tensor([0.5, 0.5]))  # ab = a + b: ([1,0]+[0,1])/2
    assert torch.allclose(rows[1], torch.tensor([1.5, 0.0]))  # abc = a + bc: ([1,0]+[2,0])/2
    assert torch.allclose(rows[2], torch.tensor([1.4, 1.0]))  # zz: no base piece, the mean


def test_a_side_data_init_without_its_data_is_one_line() -> None:
    with pytest.raises(ConfigError, match="init 'align' needs alignments") as e:
        initialise("align", OLD, tokens())
    assert "\n" not in str(e.value)
    with pytest.raises(PolymnesiaError, match="unknown new-token initialisation 'mea'"):
        initialise("mea", OLD, tokens())


def test_normal_is_seeded_and_close_to_the_mean() -> None:
    a = initialise("normal", OLD, tokens(seed=1))
    assert torch.equal(a, initialise("normal", OLD, tokens(seed=1)))
    assert not torch.equal(a, initialise("normal", OLD, tokens(seed=2)))
    # scale 1e-9: standard deviations of ~1e-4.5 around (1.4, 1.0)
    assert torch.allclose(a, torch.tensor([[1.4, 1.0]] * 3), atol=1e-3)


def test_normal_has_the_old_rows_covariance() -> None:
    many = NewTokens(Tok(BASE_VOCAB), Tok(MERGED_VOCAB), 5, tuple(range(5, 20005)))
    x = normal_init(OLD, many, scale=1.0)
    mu = OLD.double().mean(0)
    cov = (OLD.double() - mu).T @ (OLD.double() - mu) / 5  # xy: (.4 + 0 + 0 + 3.2 - .6)/5 = .6
    assert torch.allclose(cov, torch.tensor([[1.04, 0.6], [0.6, 1.2]], dtype=torch.float64))
    assert torch.allclose(x.mean(0), mu, atol=0.03)
    assert torch.allclose(torch.cov(x.T), cov, atol=0.05)


def test_normal_with_a_singular_covariance_stays_on_its_line() -> None:
    line = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
    x = normal_init(line, tokens(), scale=1.0)
    assert torch.allclose(x[:, 0], x[:, 1], atol=1e-9)


def test_sparsemax() -> None:
    assert torch.allclose(sparsemax(torch.tensor([0.0, 1.0, 0.0])), torch.tensor([0.0, 1.0, 0.0]))
    # z = (.5, .3, -1): support {1, 2}, tau = (.8 - 1)/2 = -.1 -> (.6, .4, 0)
    assert torch.allclose(sparsemax(torch.tensor([0.5, 0.3, -1.0])), torch.tensor([0.6, 0.4, 0.0]))
    p = sparsemax(torch.randn(50, 30, generator=torch.Generator().manual_seed(0)))
    assert torch.allclose(p.sum(1), torch.ones(50)) and (p >= 0).all()


def test_sparsemax_from_the_top_entries_is_exact() -> None:
    gen = torch.Generator().manual_seed(0)
    z = torch.cat([torch.randn(20, 600, generator=gen), torch.zeros(3, 600)])  # big supports
    z[:10] *= 30  # small supports
    assert torch.allclose(sparsemax_topk(z, 16), sparsemax(z), atol=1e-12)


def static(vectors: list[list[float]], counts: list[int]) -> StaticEmbeddings:
    return StaticEmbeddings(torch.tensor(vectors, dtype=torch.float32), torch.tensor(counts), 1)


#: static vectors: a, b, c along the axes; d and bc unseen; ab = b exactly; abc between a and b
STATIC = static(
    [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 2, 0], [1, 1, 0], [0, 0, 0]],
    [5, 5, 5, 0, 0, 5, 5, 0],
)


def test_focus() -> None:
    rows = initialise("focus", OLD, tokens(static=STATIC))
    assert torch.allclose(rows[0], OLD[1])  # ab: cosine 1 with b, 0 with a and c -> b's row
    # abc: cosines (.707, .707, 0): sparsemax (.5, .5, 0) -> (a + b)/2
    assert torch.allclose(rows[1], torch.tensor([0.5, 0.5]))
    assert torch.allclose(rows[2], torch.tensor([1.4, 1.0]))  # zz unseen: the mean
    w = focus_weights(STATIC.vectors[[5, 6]], STATIC.vectors[:3])
    assert torch.allclose(w.sum(1), torch.ones(2, dtype=torch.float64))


def test_omp() -> None:
    vecs = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0], [0, 0, 0], [0, 2, 0], [2, 0, 3], [0, 0, 0]]
    rows = initialise("omp", OLD, tokens(static=static(vecs, [5, 5, 5, 0, 0, 5, 5, 0])))
    assert torch.allclose(rows[0], 2 * OLD[1])  # ab = 2 b in static space -> 2 * b's row
    assert torch.allclose(rows[1], 2 * OLD[0] + 3 * OLD[2])  # abc = 2a + 3c -> [5, 3]
    assert torch.allclose(rows[2], torch.tensor([1.4, 1.0]))


def test_omp_matches_scikit_learn() -> None:
    from sklearn.linear_model import orthogonal_mp

    rng = np.random.default_rng(0)
    d = rng.standard_normal((40, 12))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    y = rng.standard_normal((7, 12))
    idx, coef = omp(torch.from_numpy(d), torch.from_numpy(y), 4)
    ref = orthogonal_mp(d.T, y.T, n_nonzero_coefs=4)  # [40, 7]
    for i in range(7):
        dense = np.zeros(40)
        dense[idx[i].numpy()] = coef[i].numpy()
        np.testing.assert_allclose(dense, ref[:, i], atol=1e-8)


def test_ibm1_by_hand() -> None:
    """the house / la maison, the flower / la fleur (source the=0 house=1 flower=2; target
    la=5 maison=6 fleur=7). Round 1 from uniform t: every link in a pair gets 1/3 (three
    sources with NULL). M-step: t(maison|the) = (1/3)/(4/3) = .25, t(maison|house) = .5,
    t(maison|NULL) = .25. Round 2: maison's links .25 (the), .5 (house), .25 (NULL)."""
    pairs = [([0, 1], [5, 6]), ([0, 2], [5, 7])]
    one = ibm1_alignment(pairs, 5, 8, rounds=1).counts.toarray()
    assert np.allclose(one[6, :3], [1 / 3, 1 / 3, 0])
    two = ibm1_alignment(pairs, 5, 8, rounds=2).counts.toarray()
    assert np.allclose(two[6, :3], [0.25, 0.5, 0])
    rows = initialise(
        "align", OLD, tokens(alignment=Alignment(ibm1_alignment(pairs, 5, 8, rounds=2).counts))
    )
    # maison = (.25 the + .5 house) / .75: here the = a, house = b -> (1/3, 2/3)
    assert torch.allclose(rows[1], torch.tensor([1 / 3, 2 / 3]), atol=1e-6)
    # fleur by symmetry: 1/3 the (a) + 2/3 flower (c) -> (1/3)[1, 0] + (2/3)[1, 1]
    assert torch.allclose(rows[2], torch.tensor([1.0, 2 / 3]), atol=1e-6)


def test_align_exact_copy_and_unaligned() -> None:
    """A target token only ever aligned to b gets b's row (NULL links left out)."""
    al = ibm1_alignment([([1], [5]), ([1], [5])], 5, 8, rounds=3)
    rows = initialise("align", OLD, tokens(alignment=al))
    assert torch.allclose(rows[0], OLD[1])
    assert torch.allclose(rows[1], torch.tensor([1.4, 1.0]))  # never aligned: the mean


def test_static_embeddings_give_equal_contexts_equal_vectors() -> None:
    seqs = [[0, 1, 2], [0, 5, 2], [3, 4, 3], [2, 0, 4]] * 5
    st = static_embeddings(seqs, 8, dim=3, window=1, min_count=2)
    assert st.known().tolist() == [True, True, True, True, True, True, False, False]
    v = torch.nn.functional.normalize(st.vectors[[1, 5]], dim=1)
    assert torch.allclose(v[0], v[1], atol=1e-5)  # 1 and 5 both sit between 0 and 2
    assert st.vectors[6].abs().sum() == 0
    again = static_embeddings(seqs, 8, dim=3, window=1, min_count=2)
    assert torch.equal(st.vectors, again.vectors)


#: WECHSEL: the pretraining languages' static space (base ids a, b, c, d; bc unseen) and the new
#: language's, which is the same space turned by 90 degrees: (x, y) -> (-y, x)
SOURCE = static([[1, 0], [0, 1], [1, 1], [-1, 0], [0, 0]], [5, 5, 5, 5, 0])
TURNED = static(
    [[0, 1], [-1, 0], [-1, 1], [0, -1], [0, 0], [0, 1], [0, 0], [-3, 0]], [5, 5, 5, 5, 0, 5, 0, 5]
)


def test_procrustes_undoes_a_rotation() -> None:
    w = procrustes(TURNED.vectors[:4], SOURCE.vectors[:4])
    assert torch.allclose(w, torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64))
    assert torch.allclose(TURNED.vectors[:4].double() @ w, SOURCE.vectors[:4].double())


def test_wechsel_weights_are_a_softmax_over_the_top_k() -> None:
    w = wechsel_weights(torch.tensor([[1.0, 0.0, 0.5, -1.0]]), k=2, temperature=0.1)
    e = math.exp(10) + math.exp(5)  # top 2: entries 0 and 2
    assert torch.allclose(w, torch.tensor([[math.exp(10) / e, 0.0, math.exp(5) / e, 0.0]]))
    many = wechsel_weights(torch.randn(7, 30, generator=torch.Generator().manual_seed(0)))
    assert torch.allclose(many.sum(1), torch.ones(7)) and ((many > 0).sum(1) == 10).all()


def test_wechsel() -> None:
    rows = initialise("wechsel", OLD, tokens(static=TURNED, source_static=SOURCE))
    # ab: (0, 1) maps back to (1, 0); cosines to a, b, c, d: 1, 0, .7071, -1; the top 10 is
    # all four: softmax of (10, 0, 7.071, -10)
    z = [math.exp(10), 1.0, math.exp(10 / math.sqrt(2)), math.exp(-10)]
    expected = sum(zi * OLD[i].double() for i, zi in enumerate(z)) / sum(z)
    assert torch.allclose(rows[0].double(), expected, atol=1e-6)
    assert torch.allclose(rows[1], torch.tensor([1.4, 1.0]))  # abc unseen: the mean
    # zz: (-3, 0) maps back to (0, 3): b's direction, then c at cosine .7071
    assert rows[2, 1] > 0.99 and rows[2, 0] < 0.06
    # k = 1, as close to a copy as WECHSEL gets: ab is a's row exactly
    one = INITS.get("wechsel").fn
    tk = tokens(static=TURNED, source_static=SOURCE)
    assert torch.equal(functools.partial(one, k=1)(OLD, tk)[0], OLD[0].double())


def test_wechsel_needs_both_static_spaces_in_one_line() -> None:
    with pytest.raises(ConfigError, match="static embeddings of the pretraining languages"):
        initialise("wechsel", OLD, tokens(static=TURNED))
    three = static([[1, 0, 0]] * 5, [5] * 5)
    with pytest.raises(PolymnesiaError, match="2 and 3 dimensions cannot be aligned"):
        initialise("wechsel", OLD, tokens(static=TURNED, source_static=three))
