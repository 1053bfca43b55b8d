"""Replay (the two-phase CFT paper, sec. 5.1): deterministic mixing shares; generative replay from a
model
(the model runs in the replay_data stage; the data module pairs its answers)."""

from __future__ import annotations

import pytest
import torch

from polymnesia.errors import ConfigError, DataError
from polymnesia.instructions.replay import answered_records, mix_replay, replay_size
from polymnesia.stages.replay_data import generative_replay
from polymnesia.tokenizers.bpe import IM_END

P2 = [f"ml{i}" for i in range(100)]
POOL = [f"en{i}" for i in range(30)]


def test_replay_size_paper_shares() -> None:
    assert replay_size(100, 0.05) == 5  # GR_5
    assert replay_size(100, 0.10) == 10  # GR_10, ER_10
    assert replay_size(7, 0.0) == 0
    with pytest.raises(ConfigError, match="share"):
        replay_size(10, 1.5)


def test_mix_replay_counts_and_flags() -> None:
    mix = mix_replay(P2, POOL, 0.1, seed=0)
    assert len(mix.records) == 110 and mix.n_replay == 10
    assert sorted(r for r in mix.records if r.startswith("ml")) == sorted(P2)  # all kept, once
    replayed = [r for r, f in zip(mix.records, mix.is_replay, strict=True) if f]
    assert all(r.startswith("en") for r in replayed) and len(set(replayed)) == 10
    assert mix.records != [*P2, *replayed]  # shuffled in


def test_mix_replay_deterministic() -> None:
    a, b = mix_replay(P2, POOL, 0.05, seed=3), mix_replay(P2, POOL, 0.05, seed=3)
    assert a.records == b.records and a.is_replay == b.is_replay
    assert mix_replay(P2, POOL, 0.05, seed=4).records != a.records
    tail = mix_replay(P2, POOL, 0.05, seed=3, shuffle=False).records
    assert tail[:100] == P2 and all(r.startswith("en") for r in tail[100:])


def test_pool_too_small() -> None:
    with pytest.raises(DataError, match="needs 10 examples .* pool has 3"):
        mix_replay(P2, POOL[:3], 0.1)


@pytest.fixture(scope="module")
def tok_model(make_tok_model):  # type: ignore[no-untyped-def]
    return make_tok_model(["the cat sat on the mat", "translate this sentence please"])


def _force(model: torch.nn.Module, token_id: int):  # type: ignore[no-untyped-def]
    """Make greedy decoding always pick ``token_id`` (a hook adds a large logit)."""

    def hook(_m, _i, out):  # type: ignore[no-untyped-def]
        out = out.clone()
        out[..., token_id] += 1e4
        return out

    return model.lm_head.register_forward_hook(hook)  # type: ignore[union-attr]


def test_generative_replay_answers_from_the_model(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    cat = tok("cat", add_special_tokens=False)["input_ids"]
    assert len(cat) == 1
    recs = [
        {"instruction": "Describe the mat.", "input": "", "output": "original"},
        {"instruction": "Translate this sentence", "input": "the cat"},
    ]
    handle = _force(model, cat[0])
    try:
        out = generative_replay(model, tok, recs, max_new_tokens=3, batch_size=2)
    finally:
        handle.remove()
    assert [r["output"] for r in out] == ["catcatcat", "catcatcat"]  # the model's, not the original
    assert out[1]["input"] == "the cat" and out[0]["instruction"] == "Describe the mat."


def test_generative_replay_drops_empty_answers(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    handle = _force(model, tok.convert_tokens_to_ids(IM_END))
    try:
        recs = [{"instruction": "Say nothing."}]
        assert generative_replay(model, tok, recs, max_new_tokens=3) == []
        kept = generative_replay(model, tok, recs, max_new_tokens=3, drop_empty=False)
        assert kept == [{"instruction": "Say nothing.", "input": "", "output": ""}]
    finally:
        handle.remove()
    with pytest.raises(DataError, match="record 0 has no 'instruction'"):
        generative_replay(model, tok, [{"input": "x"}])


def test_answered_records_pairs_and_drops_empty() -> None:
    recs = [{"instruction": "A", "input": "x", "output": "old"}, {"instruction": "B"}]
    assert answered_records(recs, ["new", ""]) == [
        {"instruction": "A", "input": "x", "output": "new"}
    ]
    assert answered_records(recs, ["new", ""], drop_empty=False)[1] == {
        "instruction": "B",
        "input": "",
        "output": "",
    }
    with pytest.raises(DataError, match="1 answers for 2 instructions"):
        answered_records(recs, ["new"])
