"""pretraining_loss: an encoder's masked-LM loss, a decoder's causal-LM loss, chosen by the
model (paper 003's L_p), with intervals, items and group means."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from polymnesia.evaluation.likelihood import lm_stats
from polymnesia.evaluation.masked import mlm_items
from polymnesia.io import write_jsonl_atomic
from polymnesia.items import BootstrapConfig, read_items
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.results import Score, read_scores
from polymnesia.stages.evaluate_lm import EvaluateLMParams, PretrainingLoss
from polymnesia.testing import corpus, special_ids, tiny_model, tiny_sentencepiece

TEXTS = {
    "en": ["the cat sat on the mat", "a dog ran", "the mat is red and the cat is black", "law"],
    "fr": ["le chat est assis", "un chien court vite", "la loi"],
}


def _run(tmp_path: Path, model, tok) -> tuple[list[Score], Path]:  # type: ignore[no-untyped-def]
    save_model_and_tokenizer(model, tok, tmp_path / "pretrain" / "model")
    for lang, texts in TEXTS.items():
        write_jsonl_atomic(
            tmp_path / "data" / lang / "test.jsonl",
            [{"id": f"{lang}{i}", "lang": lang, "text": t} for i, t in enumerate(texts)],
        )
    params = EvaluateLMParams(
        label="base",
        languages={"en": "forgetting", "fr": "forgetting"},
        bootstrap=BootstrapConfig(n_resamples=200),
    )
    out = tmp_path / "entry"
    out.mkdir()
    inputs = {"model": tmp_path / "pretrain", "data": tmp_path / "data"}
    ctx = StageContext(StageSpec("base_lm", "pretraining_loss", params), out, inputs)
    return PretrainingLoss().run(ctx), out


def test_an_encoder_is_scored_by_its_masked_lm_loss(tmp_path: Path) -> None:
    tok, _ = tiny_sentencepiece(corpus(("en", "fr")), 300, "unigram")
    model = tiny_model("xlm-roberta", len(tok), **special_ids(tok)).eval()
    scores, out = _run(tmp_path, model, tok)
    assert [(s.lang, s.metric) for s in scores] == [("en", "mlm_loss"), ("fr", "mlm_loss")]
    st, _ = mlm_items(model, tok, TEXTS["en"], batch_size=64, max_length=256)
    en = scores[0]
    assert en.value == pytest.approx(st.loss, rel=1e-6) and en.extra["tokens"] == st.tokens
    assert en.extra["unit"] == "nats/masked token" and en.extra["objective"] == "masked"
    assert en.ci_low is not None and en.ci_high is not None and en.n == 4
    assert [(s.lang, s.n) for s in read_items(out / "items.jsonl")] == [("en", 4), ("fr", 3)]
    groups = read_scores(out / "groups.jsonl")
    assert {(g.lang, g.metric) for g in groups} == {
        (f"mu_{g}", "mlm_loss") for g in ("forgetting", "overall")
    }


def test_a_decoder_is_scored_by_its_causal_lm_loss(make_tok_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tok, model = make_tok_model([t for ts in TEXTS.values() for t in ts])
    scores, _ = _run(tmp_path, model, tok)
    assert [(s.lang, s.metric) for s in scores] == [("en", "lm_loss"), ("fr", "lm_loss")]
    st = lm_stats(model, tok, TEXTS["fr"], batch_size=64, max_length=256)
    fr = scores[1]
    assert fr.value == pytest.approx(math.log(st.perplexity), rel=1e-6)  # evaluate_lm's loss
    assert fr.extra["unit"] == "nats/token" and fr.extra["objective"] == "causal"
