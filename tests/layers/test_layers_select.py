"""Selection per weight type (Spectrum), per whole layer (LF_H1), and which side is frozen."""

from __future__ import annotations

import pytest

from polymnesia.errors import ConfigError
from polymnesia.layers.select import frozen_names, layer_index, select, weight_type

Q = "model.layers.{}.self_attn.q_proj.weight"
K = "model.layers.{}.self_attn.k_proj.weight"
EMB, HEAD = "model.embed_tokens.weight", "lm_head.weight"

SCORES = {
    **{Q.format(i): s for i, s in enumerate([0.1, 0.9, 0.5, 0.7])},
    **{K.format(i): s for i, s in enumerate([0.8, 0.2, 0.6, 0.3])},
    EMB: 99.0,
    HEAD: 99.0,
}


def test_weight_type_and_layer_index() -> None:
    assert weight_type(Q.format(12)) == "model.layers.self_attn.q_proj.weight"
    assert layer_index(Q.format(12)) == 12
    assert layer_index(EMB) is None


def test_top_half_per_type_like_spectrum() -> None:
    # int(4 * 50 / 100) = 2 per type; embeddings and head are never candidates
    assert select(SCORES, pct=50) == {Q.format(1), Q.format(3), K.format(0), K.format(2)}
    assert select(SCORES, pct=30) == {Q.format(1), K.format(0)}  # int(1.2) = 1
    assert select(SCORES, pct=0) == set()


def test_top_k_per_type() -> None:
    assert select(SCORES, top_k=1) == {Q.format(1), K.format(0)}
    assert len(select(SCORES, top_k=10)) == 8


def test_by_layer_mean_score() -> None:
    # layer means: 0.45, 0.55, 0.55, 0.5 -> top 2 = layers 1 and 2 (tie kept by order)
    assert select(SCORES, top_k=2, by="layer") == {
        Q.format(1),
        K.format(1),
        Q.format(2),
        K.format(2),
    }


def test_ties_are_deterministic() -> None:
    flat = {Q.format(i): 1.0 for i in range(4)}
    assert select(flat, pct=50) == {Q.format(0), Q.format(1)}


def test_frozen_sides() -> None:
    names = [*SCORES, "model.layers.1.self_attn.q_proj.bias", "model.norm.weight"]
    chosen = select(SCORES, top_k=1)
    assert frozen_names(names, chosen, "selected") == {
        Q.format(1),
        "model.layers.1.self_attn.q_proj.bias",
        K.format(0),
    }
    spectrum = frozen_names(names, chosen, "unselected")
    assert EMB not in spectrum and HEAD not in spectrum  # Spectrum leaves them trainable
    assert "model.norm.weight" in spectrum and Q.format(0) in spectrum
    assert Q.format(1) not in spectrum


@pytest.mark.parametrize(
    "kw",
    [{}, {"pct": 50, "top_k": 2}, {"pct": 120}, {"top_k": -1}, {"pct": 50, "by": "head"}],
)
def test_bad_selection(kw: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError):
        select(SCORES, **kw)


MOE = "model.layers.{}.block_sparse_moe.experts.{}.w1.weight"


def test_experts_are_their_own_weight_types() -> None:
    """Spectrum's reference groups per module: the type is the name after the layer index,
    so expert 0 and expert 1 of a mixture-of-experts layer are two types (removing every
    number from the name merged them, and pct then picked among all experts together)."""
    assert weight_type(MOE.format(3, 5)) == "model.layers.block_sparse_moe.experts.5.w1.weight"
    assert weight_type(MOE.format(3, 5)) != weight_type(MOE.format(3, 6))
    # expert 0 scores high in every layer, expert 1 low: per expert, each keeps its top half
    scores = {MOE.format(i, 0): 10.0 + i for i in range(4)}
    scores.update({MOE.format(i, 1): 0.1 * i for i in range(4)})
    chosen = select(scores, pct=50)
    assert chosen == {MOE.format(2, 0), MOE.format(3, 0), MOE.format(2, 1), MOE.format(3, 1)}
