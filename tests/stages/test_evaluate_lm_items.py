"""evaluate_lm: scores unchanged by the intervals, per-text items and group intervals on disk;
pretraining_loss: the model's own loss (masked for an encoder, causal for a decoder)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from polymnesia.evaluation.likelihood import lm_items, lm_stats
from polymnesia.evaluation.masked import mlm_items
from polymnesia.io import write_jsonl_atomic
from polymnesia.items import BootstrapConfig, read_items
from polymnesia.metrics.base import scored_metrics
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.results import read_scores
from polymnesia.stages.evaluate_lm import EvaluateLM, EvaluateLMParams, PretrainingLoss
from polymnesia.testing import corpus, special_ids, tiny_model, tiny_sentencepiece

TEXTS = {
    "en": ["the cat sat on the mat", "a dog ran", "the mat is red and the cat is black", "law"],
    "fr": ["le chat est assis", "un chien court vite", "la loi"],
}
FORGETTING = {"en": "forgetting", "fr": "forgetting"}


@pytest.fixture(scope="module")
def tok_model(make_tok_model):  # type: ignore[no-untyped-def]
    return make_tok_model([t for ts in TEXTS.values() for t in ts])


def test_lm_items_sum_to_lm_stats(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    st, cols = lm_items(model, tok, TEXTS["en"], batch_size=2, max_length=64)
    assert st == lm_stats(model, tok, TEXTS["en"], batch_size=2, max_length=64)
    assert sum(cols["nll"]) == pytest.approx(st.nll)
    assert (sum(cols["tokens"]), sum(cols["bytes"]), sum(cols["words"])) == (
        st.tokens,
        st.bytes,
        st.words,
    )
    assert cols["bytes"][2] == len(TEXTS["en"][2].encode())  # input order kept


def run_stage(stage: type[EvaluateLM], tmp_path: Path, model, tok, groups: dict[str, str]):  # type: ignore[no-untyped-def]
    """``stage`` (``evaluate_lm`` or ``pretraining_loss``) on ``model`` and TEXTS' test split:
    its scores and its entry folder."""
    save_model_and_tokenizer(model, tok, tmp_path / "pretrain" / "model")
    for lang, texts in TEXTS.items():
        write_jsonl_atomic(
            tmp_path / "data" / lang / "test.jsonl",
            [{"id": f"{lang}{i}", "lang": lang, "text": t} for i, t in enumerate(texts)],
        )
    params = EvaluateLMParams(
        label="Baseline", languages=groups, bootstrap=BootstrapConfig(n_resamples=200)
    )
    out = tmp_path / "entry"
    out.mkdir()
    ctx = StageContext(
        StageSpec("eval", "evaluate_lm", params),
        out,
        {"model": tmp_path / "pretrain", "data": tmp_path / "data"},
    )
    return stage().run(ctx), out


def test_evaluate_lm_stage_writes_items_and_intervals(tok_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    scores, out = run_stage(EvaluateLM, tmp_path, model, tok, {"en": "pretraining", "fr": "other"})
    st = lm_stats(model, tok, TEXTS["en"], batch_size=64, max_length=256)
    bpb = next(s for s in scores if s.lang == "en" and s.metric == "bits_per_byte")
    assert bpb.value == st.bits_per_byte  # the reported number is untouched
    assert bpb.n == 4 and bpb.ci_low is not None and bpb.ci_high is not None
    assert bpb.ci_low <= bpb.value <= bpb.ci_high
    items = read_items(out / "items.jsonl")
    assert [(s.lang, s.n, s.group) for s in items] == [("en", 4, "pretraining"), ("fr", 3, "other")]
    # every metric registered for lm items, none of the losses a stage picks by name
    assert [s.metric for s in scores if s.lang == "en"] == scored_metrics("lm")
    assert scored_metrics("lm") == ["bits_per_byte", "perplexity", "word_perplexity"]
    wppl = next(s for s in scores if s.lang == "en" and s.metric == "word_perplexity")
    assert wppl.value == st.word_perplexity and wppl.n == 4 and wppl.ci_low is not None
    groups = read_scores(out / "groups.jsonl")
    assert {(g.lang, g.metric) for g in groups} == {
        (f"mu_{g}", m)
        for g in ("pretraining", "other", "overall")
        for m in ("perplexity", "bits_per_byte", "word_perplexity")
    }
    overall = next(g for g in groups if g.lang == "mu_overall" and g.metric == "bits_per_byte")
    per_lang = [s.value for s in scores if s.metric == "bits_per_byte"]
    assert overall.value == pytest.approx(sum(per_lang) / 2) and overall.n == 7


def test_pretraining_loss_of_an_encoder_is_its_masked_lm_loss(tmp_path: Path) -> None:
    """Mao et al. 2022's L_p for a loaded encoder: the masked-LM loss, chosen by the model."""
    tok, _ = tiny_sentencepiece(corpus(("en", "fr")), 300, "unigram")
    model = tiny_model("xlm-roberta", len(tok), **special_ids(tok)).eval()
    scores, out = run_stage(PretrainingLoss, tmp_path, model, tok, FORGETTING)
    assert [(s.lang, s.metric) for s in scores] == [("en", "mlm_loss"), ("fr", "mlm_loss")]
    st, _ = mlm_items(model, tok, TEXTS["en"], batch_size=64, max_length=256)
    en = scores[0]
    assert en.value == pytest.approx(st.loss, rel=1e-6) and en.extra["tokens"] == st.tokens
    assert en.extra["unit"] == "nats/masked token" and en.extra["objective"] == "masked"
    assert en.ci_low is not None and en.ci_high is not None and en.n == 4
    assert [(s.lang, s.n) for s in read_items(out / "items.jsonl")] == [("en", 4), ("fr", 3)]
    groups = {(g.lang, g.metric) for g in read_scores(out / "groups.jsonl")}
    assert groups == {(f"mu_{g}", "mlm_loss") for g in ("forgetting", "overall")}


def test_pretraining_loss_of_a_decoder_is_its_causal_lm_loss(tok_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    scores, _ = run_stage(PretrainingLoss, tmp_path, model, tok, FORGETTING)
    assert [(s.lang, s.metric) for s in scores] == [("en", "lm_loss"), ("fr", "lm_loss")]
    st = lm_stats(model, tok, TEXTS["fr"], batch_size=64, max_length=256)
    fr = scores[1]
    assert fr.value == pytest.approx(math.log(st.perplexity), rel=1e-6)  # evaluate_lm's loss
    assert fr.extra["unit"] == "nats/token" and fr.extra["objective"] == "causal"
