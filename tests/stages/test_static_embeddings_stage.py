"""static_embeddings: the merged vocabulary and the side data as one cached entry, read back
by relearn_new_tokens; one-line refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from vocabulary_helpers import EN, FR, write

from polymnesia.errors import DataError
from polymnesia.pipeline.stage import STAGES, StageContext, StageSpec
from polymnesia.stages.relearn_new_tokens import RelearnParams, check_same_base
from polymnesia.stages.static_embeddings import (
    StaticEmbeddingsParams,
    VocabularySection,
    load_side_data,
    needs_of,
)
from polymnesia.tokenizers.bpe import save_tokenizer, train_bpe
from polymnesia.training.config import TrainConfig


def test_needs_of_inits() -> None:
    assert needs_of(["mean", "normal"]) == []
    assert needs_of(["align", "focus"]) == ["static", "alignment"]
    assert needs_of(["wechsel", "mean"]) == ["static", "source_static"]


def test_the_entry_round_trips_and_fits_its_base(tmp_path: Path) -> None:
    data, tok, out = tmp_path / "data", tmp_path / "tok", tmp_path / "out"
    write(data, "en", EN * 15)
    write(data, "fr", [f"{f} {e}" for f, e in zip(FR, EN, strict=True)] * 15)
    base = train_bpe(EN * 15, 300)
    save_tokenizer(base, tok / "tokenizer")
    out.mkdir()
    params = StaticEmbeddingsParams(
        vocabulary=VocabularySection(new_vocab_size=330, sample_texts=60),
        adapting=["fr"],
        pretraining=["en"],
        needs=["static", "source_static", "alignment"],
    )
    spec = StageSpec("vocabulary", "static_embeddings", params, {"data": "d", "tokenizer": "t"})
    ctx = StageContext(spec, out, {"data": data, "tokenizer": tok})
    scores = STAGES.get("static_embeddings")().run(ctx)
    sizes = {s.setting: s.value for s in scores}
    assert sizes["merged"] == sizes["base"] + sizes["added"] and sizes["added"] > 0
    side = load_side_data(out)
    assert side.first_new_id == len(base) and len(side.merged) == sizes["merged"]
    assert side.static is not None and side.static.vectors.shape[0] == len(side.merged)
    assert side.source_static is not None and side.source_static.vectors.shape[0] == len(base)
    assert side.alignment is not None and side.alignment.counts.nnz > 0
    check_same_base(base, side)  # the merged tokenizer extends the base: no error
    other = train_bpe(FR * 15, 300)
    with pytest.raises(DataError, match="does not extend this base model's tokenizer") as e:
        check_same_base(other, side)
    assert "\n" not in str(e.value)
    cut = type(side)(
        side.merged,
        side.first_new_id,
        type(side.static)(side.static.vectors[:5], side.static.counts[:5]),
        None,
        None,
    )
    with pytest.raises(DataError, match="static embeddings of 5 tokens for a vocabulary of"):
        check_same_base(base, cut)
    assert torch.equal(load_side_data(out).static.vectors, side.static.vectors)  # type: ignore[union-attr]


def test_a_folder_without_the_entry_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="holds no readable vocabulary.json"):
        load_side_data(tmp_path)


def test_relearn_params_refuse_steps_past_the_relearning() -> None:
    kw = {"label": "standard", "init": "mean", "adapting": ["fr"], "languages": {"fr": "a"}}
    p = RelearnParams(**kw, train=TrainConfig(steps=8), eval_at=[2, 4])  # type: ignore[arg-type]
    assert p.steps() == [0, 2, 4, 8]
    with pytest.raises(ValidationError, match=r"eval_at \[9\] outside 0..train.steps \(8\)"):
        RelearnParams(**kw, train=TrainConfig(steps=8), eval_at=[9])  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown init 'focu'; accepted:"):
        RelearnParams(**{**kw, "init": "focu"}, eval_at=[])  # type: ignore[arg-type]
