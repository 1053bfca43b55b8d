"""adapt_vocabulary with every registered initialisation: side data from prepared text,
embeddings and a kept head initialised the same way, tied models, one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from vocabulary_helpers import EN, FR, write

from polymnesia.errors import ConfigError
from polymnesia.models.new_tokens import INITS, NewTokens, initialise
from polymnesia.models.resize import new_ids, resize_and_init
from polymnesia.stages.adapt_vocabulary import (
    AdaptConfig,
    AdaptVocabularyParams,
    side_data,
    source_side_data,
)
from polymnesia.testing import tiny_model
from polymnesia.tokenizers.bpe import train_bpe
from polymnesia.tokenizers.encode import token_ids
from polymnesia.tokenizers.merge import merge_tokenizers


@pytest.fixture(scope="module")
def setup(tmp_path_factory):  # type: ignore[no-untyped-def]
    data = tmp_path_factory.mktemp("data")
    write(data, "en", EN * 15)
    write(data, "fr", FR * 15)
    base = train_bpe(EN * 15, 300)
    merged, report = merge_tokenizers(base, train_bpe(FR * 15, 330))
    return data, base, merged, report


def params(init: str, **kw: object) -> AdaptVocabularyParams:
    return AdaptVocabularyParams(
        adapting=["fr"], pretraining=["en"], adapt=AdaptConfig(init=init), **kw
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("init", sorted(INITS.names()))
@pytest.mark.parametrize("tied", [False, True])
def test_every_init_through_the_stage(setup, init: str, tied: bool) -> None:  # type: ignore[no-untyped-def]
    data, base, merged, report = setup
    static, alignment = side_data(init, base, merged, data, params(init))
    source = source_side_data(init, base, data, params(init))
    needs = INITS.get(init).needs
    assert (static is not None) == ("static" in needs)
    assert (alignment is not None) == ("alignment" in needs)
    assert (source is not None) == ("source_static" in needs)
    model = tiny_model("mistral", len(base), tie_word_embeddings=tied, pad_token_id=3)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    head0 = model.lm_head.weight.detach().clone()
    first = report.first_new_id
    side = {"static": static, "alignment": alignment, "source_static": source}
    resize_and_init(model, merged, base, first, init, head="keep", seed=4, **side)
    emb = model.get_input_embeddings().weight.detach()
    ids = list(new_ids(merged, first))
    assert torch.equal(emb[:first], emb0[:first])
    tokens = NewTokens(base, merged, first, tuple(ids), static, alignment, 4, source)
    assert torch.equal(emb[ids], initialise(init, emb0, tokens))
    if not tied:  # the head's new rows come from the head's old rows, the same way
        head = model.lm_head.weight.detach()
        assert torch.equal(head[:first], head0[:first])
        head_tokens = NewTokens(base, merged, first, tuple(ids), static, alignment, 5, source)
        assert torch.equal(head[ids], initialise(init, head0, head_tokens))
    if init in ("focus", "omp", "align"):  # every new token seen in the text leaves the mean
        seen = {t for x in merged(FR, add_special_tokens=False)["input_ids"] for t in x}
        used = sorted(seen & set(ids))  # 11 of 26: the others are intermediate merges
        assert len(used) >= 10
        assert all(not torch.allclose(emb[i], emb0.mean(0)) for i in used)


def test_wechsel_through_the_stage_with_shared_tokens(tmp_path: Path) -> None:
    """WECHSEL aligns the two static spaces on old tokens seen in both texts: with French text
    that shares words with the English (none in the fixture's), every new token seen leaves
    the mean."""
    write(tmp_path, "en", EN * 15)
    write(tmp_path, "fr", [f"{f} {e}" for f, e in zip(FR, EN, strict=True)] * 15)
    base = train_bpe(EN * 15, 300)
    merged, report = merge_tokenizers(base, train_bpe(FR * 15, 330))
    p = params("wechsel")
    static, _ = side_data("wechsel", base, merged, tmp_path, p)
    source = source_side_data("wechsel", base, tmp_path, p)
    assert static is not None and source is not None
    first = report.first_new_id
    anchors = static.known()[:first] & source.known()[:first]
    assert int(anchors.sum()) >= 10
    ids = new_ids(merged, first)
    old = torch.randn(len(base), 8, generator=torch.Generator().manual_seed(0))
    rows = initialise("wechsel", old, NewTokens(base, merged, first, ids, static, None, 0, source))
    seen = sorted(set(ids) & {t for x in token_ids(merged, FR) for t in x})
    assert len(seen) >= 10
    moved = [not torch.allclose(rows[ids.index(i)], old.mean(0)) for i in seen]
    assert all(moved)


def test_unknown_init_and_align_without_pretraining_refused() -> None:
    with pytest.raises(ValidationError, match="unknown init 'focu'; accepted: align, focus"):
        AdaptConfig(init="focu")
    with pytest.raises(ValidationError, match="no pretraining language is given"):
        AdaptVocabularyParams(adapting=["fr"], adapt=AdaptConfig(init="align"))
    with pytest.raises(ValidationError, match="no pretraining language is given"):
        AdaptVocabularyParams(adapting=["fr"], adapt=AdaptConfig(init="wechsel"))


def test_missing_side_data_is_one_line(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, base, merged, _ = setup
    write(tmp_path, "en", EN)
    write(tmp_path, "fr", [])
    write(tmp_path, "de", ["ein Hund"])
    with pytest.raises(ConfigError, match="fr have no train text") as e:
        side_data("focus", base, merged, tmp_path, params("focus"))
    assert "\n" not in str(e.value)
    write(tmp_path, "en", [])
    with pytest.raises(ConfigError, match="pretraining languages' text, but en have no") as e:
        source_side_data("wechsel", base, tmp_path, params("wechsel"))
    assert "\n" not in str(e.value)
    p = AdaptVocabularyParams(adapting=["de"], pretraining=["fr"], adapt=AdaptConfig(init="align"))
    with pytest.raises(ConfigError, match="needs parallel text, but no train record of de") as e:
        side_data("align", base, merged, tmp_path, p)
    assert "\n" not in str(e.value)


def test_side_data_is_kept_in_the_entry(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import scipy.sparse as sp
    from safetensors.torch import load_file

    from polymnesia.stages.adapt_vocabulary import save_side_data

    data, base, merged, _ = setup
    static, _ = side_data("focus", base, merged, data, params("focus"))
    _, alignment = side_data("align", base, merged, data, params("align"))
    assert static is not None and alignment is not None
    save_side_data(tmp_path, static, alignment)
    saved = load_file(str(tmp_path / "static_embeddings.safetensors"))
    assert torch.equal(saved["vectors"], static.vectors)
    assert torch.equal(saved["counts"], static.counts)
    counts = sp.load_npz(tmp_path / "alignment_counts.npz")
    assert (counts != alignment.counts).nnz == 0
