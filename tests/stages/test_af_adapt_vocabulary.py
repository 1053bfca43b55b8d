"""adapt_vocabulary pieces: resizing, new-row initialisation, refusals (one line each)."""

from __future__ import annotations

import pytest
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.models.resize import check_resizable, resize_and_init
from polymnesia.stages.adapt_vocabulary import AdaptConfig, AdaptVocabularyParams
from polymnesia.tokenizers.bpe import train_bpe
from polymnesia.tokenizers.merge import merge_tokenizers
from polymnesia.training.config import TrainConfig

BASE = ["the cat sat on the mat", "a dog and a cat", "the sun is hot today"] * 20
NEW = ["le chat est sur le tapis", "un chien et un chat", "bonjour le soleil chaud"] * 20


@pytest.fixture(scope="module")
def toks():  # type: ignore[no-untyped-def]
    base = train_bpe(BASE, 300)
    merged, report = merge_tokenizers(base, train_bpe(NEW, 320))
    return base, merged, report


def model_for(vocab: int, tied: bool) -> torch.nn.Module:
    from polymnesia.testing import tiny_model

    return tiny_model("mistral", vocab, tie_word_embeddings=tied, pad_token_id=3)


@pytest.mark.parametrize("tied", [False, True])
def test_resize_mean_init_keeps_old_rows(toks, tied: bool) -> None:  # type: ignore[no-untyped-def]
    base, merged, report = toks
    assert report.added > 0 and len(merged) == len(base) + report.added
    model = model_for(len(base), tied)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    head0 = model.lm_head.weight.detach().clone()
    resize_and_init(model, merged, base, report.first_new_id, "mean", head="keep")
    emb = model.get_input_embeddings().weight.detach()
    assert emb.shape[0] == len(merged)
    assert torch.equal(emb[: len(base)], emb0)
    assert torch.allclose(emb[len(base)], emb0.mean(0), atol=1e-6)
    assert model.lm_head.weight.shape[0] == len(merged)
    if not tied:
        assert torch.equal(model.lm_head.weight.detach()[: len(base)], head0)
        assert torch.allclose(model.lm_head.weight.detach()[-1], head0.mean(0), atol=1e-6)


def test_reinit_replaces_every_head_row_and_keeps_the_embeddings(toks) -> None:  # type: ignore[no-untyped-def]
    base, merged, report = toks
    model = model_for(len(base), False)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    head0 = model.lm_head.weight.detach().clone()
    resize_and_init(model, merged, base, report.first_new_id, "mean", head="reinit", seed=3)
    w = model.lm_head.weight.detach()
    assert w.shape[0] == len(merged)
    torch.manual_seed(3)  # the draw uses its own generator: the global seed does not matter
    expected = torch.randn(tuple(w.shape), generator=torch.Generator().manual_seed(3)) * 0.02
    assert torch.equal(w, expected)  # N(0, initializer_range = 0.02), seeded
    assert not torch.allclose(w[: len(base)], head0)  # old rows replaced too
    assert torch.equal(model.get_input_embeddings().weight.detach()[: len(base)], emb0)
    assert AdaptVocabularyParams(adapting=["fr"]).adapt.head == "reinit"


def test_reinit_refuses_a_tied_head_in_one_line(toks) -> None:  # type: ignore[no-untyped-def]
    base, merged, report = toks
    with pytest.raises(PolymnesiaError, match="head: reinit replaces the LM head, but") as e:
        resize_and_init(
            model_for(len(base), True), merged, base, report.first_new_id, "mean", head="reinit"
        )
    assert "\n" not in str(e.value)


def test_subtoken_mean_init(toks) -> None:  # type: ignore[no-untyped-def]
    base, merged, report = toks
    model = model_for(len(base), False)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    resize_and_init(model, merged, base, report.first_new_id, "subtoken_mean", head="keep")
    tid = report.first_new_id + report.added - 1
    text = merged.convert_tokens_to_string([merged.convert_ids_to_tokens(tid)])
    pieces = base(text, add_special_tokens=False)["input_ids"]
    assert len(pieces) >= 1
    assert torch.allclose(
        model.get_input_embeddings().weight.detach()[tid], emb0[pieces].mean(0), atol=1e-6
    )


def test_not_resizable_is_one_line() -> None:
    with pytest.raises(PolymnesiaError, match="no resizable input embeddings") as e:
        check_resizable(torch.nn.Linear(3, 3))
    assert "\n" not in str(e.value)


def test_strict_overlap_refused_and_lenient_allowed() -> None:
    train = TrainConfig(steps=1)
    with pytest.raises(ValueError, match=r"adapting languages \['fr'\] are also pretraining"):
        AdaptVocabularyParams(
            adapting=["fr"], pretraining=["en", "fr"], adapt=AdaptConfig(strict=True, train=train)
        )
    AdaptVocabularyParams(
        adapting=["fr"], pretraining=["en", "fr"], adapt=AdaptConfig(strict=False, train=train)
    )


def test_collision_with_special_token_is_one_line() -> None:
    """A new vocabulary holding '<|im_end|>' as an ordinary token cannot be merged."""
    import json

    from polymnesia.tokenizers.merge import merge_tokenizer_json

    base = json.loads(train_bpe(BASE, 300).backend_tokenizer.to_str())
    new = json.loads(train_bpe(NEW, 320).backend_tokenizer.to_str())
    new["added_tokens"] = [t for t in new["added_tokens"] if t["content"] != "<|im_end|>"]
    with pytest.raises(PolymnesiaError, match="collide with special token") as e:
        merge_tokenizer_json(base, new)
    assert "\n" not in str(e.value)
