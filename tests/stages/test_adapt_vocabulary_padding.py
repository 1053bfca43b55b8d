"""Vocabulary expansion of a model whose embedding matrix is padded (issue 26).

Qwen2/2.5/3, Phi-3 and OLMo-2 have more embedding rows than tokenizer entries (the matrix
is padded to a multiple). A tiny Qwen2 with 320 rows for a 292-token tokenizer: adding fewer
tokens than the 28 padding rows reuses them; adding more grows the matrix to the next
multiple of 64. Old rows and untouched padding rows stay bit-identical.
"""

from __future__ import annotations

import pytest
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.models.resize import new_ids, padding_multiple, resize_and_init
from polymnesia.testing import tiny_model
from polymnesia.tokenizers.bpe import train_bpe
from polymnesia.tokenizers.merge import merge_tokenizers

BASE = ["the cat sat on the mat", "a dog and a cat", "the sun is hot today"] * 20
NEW = ["le chat est sur le tapis", "un chien et un chat", "bonjour le soleil chaud"] * 20
ROWS = 320  # 5 * 64 for a tokenizer of 292 entries


@pytest.fixture(scope="module")
def base():  # type: ignore[no-untyped-def]
    tok = train_bpe(BASE, 300)
    assert len(tok) == 292
    return tok


def qwen2(tied: bool) -> torch.nn.Module:
    model = tiny_model("qwen2", ROWS, tie_word_embeddings=tied, pad_token_id=3)
    with torch.no_grad():  # padding rows that would spoil a mean if they entered it
        model.get_input_embeddings().weight[292:] = 1000.0
        if not tied:
            model.lm_head.weight[292:] = -1000.0
    return model


def test_padding_multiple() -> None:
    assert padding_multiple(151936, 151665) == 128  # Qwen2.5
    assert padding_multiple(32064, 32011) == 64  # Phi-3
    assert padding_multiple(100352, 100278) == 128  # OLMo-2
    assert padding_multiple(ROWS, 292) == 64
    assert padding_multiple(300, 300) is None


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("max_new", [10, None])  # fewer, more tokens than padding rows
def test_padded_matrix(base, tied: bool, max_new: int | None) -> None:  # type: ignore[no-untyped-def]
    merged, report = merge_tokenizers(base, train_bpe(NEW, 320), max_new_tokens=max_new)
    assert report.first_new_id == 292
    model = qwen2(tied)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    head0 = model.lm_head.weight.detach().clone()
    resize_and_init(model, merged, base, report.first_new_id, "mean", head="keep")
    emb = model.get_input_embeddings().weight.detach()
    ids = list(new_ids(merged, report.first_new_id))
    assert ids == list(range(292, 292 + report.added))
    rows = ROWS if report.added <= 28 else 384  # grown to the next multiple of 64
    assert emb.shape[0] == rows == model.config.vocab_size
    assert torch.equal(emb[:292], emb0[:292])  # old rows bit-identical
    mean = emb0[:292].mean(0)  # the real tokens' rows only, not the padding
    assert torch.allclose(emb[ids], mean.expand(len(ids), -1), atol=1e-6)
    end = 292 + report.added
    if end < ROWS:  # padding rows the new ids do not use are left as they were
        assert torch.equal(emb[end:ROWS], emb0[end:ROWS])
    if tied:
        assert model.lm_head.weight is model.get_input_embeddings().weight
    else:
        head = model.lm_head.weight.detach()
        assert head.shape[0] == rows
        assert torch.equal(head[:292], head0[:292])
        assert torch.allclose(head[ids], head0[:292].mean(0).expand(len(ids), -1), atol=1e-6)
    ids_t = torch.tensor([[5, *ids[:3]]])
    assert torch.isfinite(model(ids_t).logits).all()


def test_padded_subtoken_mean_uses_real_rows(base) -> None:  # type: ignore[no-untyped-def]
    merged, report = merge_tokenizers(base, train_bpe(NEW, 320), max_new_tokens=10)
    model = qwen2(False)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    resize_and_init(model, merged, base, report.first_new_id, "subtoken_mean", head="keep")
    emb = model.get_input_embeddings().weight.detach()
    assert emb.abs().max() >= 1000  # padding rows beyond the new ids untouched
    assert emb[292 : 292 + report.added].abs().max() < 10  # no new row from a padding row
    tid = 292
    text = merged.convert_tokens_to_string([merged.convert_ids_to_tokens(tid)])
    pieces = base(text, add_special_tokens=False)["input_ids"]
    assert torch.allclose(emb[tid], emb0[pieces].mean(0), atol=1e-6)


def test_explicit_multiple_and_unpadded_models(base) -> None:  # type: ignore[no-untyped-def]
    merged, report = merge_tokenizers(base, train_bpe(NEW, 320))
    model = tiny_model("qwen2", ROWS, pad_token_id=3)
    resize_and_init(
        model, merged, base, report.first_new_id, "mean", head="keep", pad_to_multiple_of=8
    )
    assert model.get_input_embeddings().weight.shape[0] == 328  # 323 up to a multiple of 8
    plain = tiny_model("qwen2", len(base), pad_token_id=3)  # unpadded: exactly len(merged)
    resize_and_init(plain, merged, base, report.first_new_id, "mean", head="keep")
    assert plain.get_input_embeddings().weight.shape[0] == len(merged)


def test_fewer_rows_than_tokens_is_one_line(base) -> None:  # type: ignore[no-untyped-def]
    merged, report = merge_tokenizers(base, train_bpe(NEW, 320))
    with pytest.raises(PolymnesiaError, match="has 200 embedding rows for a tokenizer of 292") as e:
        resize_and_init(tiny_model("qwen2", 200), merged, base, 292, "mean", head="keep")
    assert "\n" not in str(e.value)


def test_frozen_rows_freeze_the_old_rows_of_a_padded_matrix(base, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The rows below ``first_new_id`` are the old ones, padded matrix or not."""
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.loop import train

    merged, report = merge_tokenizers(base, train_bpe(NEW, 320), max_new_tokens=10)
    model = qwen2(False)
    resize_and_init(model, merged, base, report.first_new_id, "mean", head="keep")
    emb0 = model.get_input_embeddings().weight.detach().clone()
    ids = merged(NEW[:3], add_special_tokens=False)["input_ids"]
    blocks = torch.tensor([(x * 8)[:16] for x in ids])
    cfg = TrainConfig(steps=2, batch_size=2, block_size=16, lr=1e-2, progress_bar=False)
    plugin = FrozenRows(first_trainable_row=292)
    model, _ = train(model, PackedLMData(blocks), cfg, tmp_path, seed=0, plugins=[plugin])
    emb = model.get_input_embeddings().weight.detach()
    assert torch.equal(emb[:292], emb0[:292])
    used = sorted({t for x in ids for t in x if t >= 292})
    assert used and not torch.equal(emb[used], emb0[used])
