"""Aggarwal et al. 2024's downstream stages keep per-item evidence: the items reproduce every score
exactly,
and each score carries its bootstrap interval (zero-shot genre, translation, self-similarity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.io import write_jsonl_atomic
from polymnesia.items import BootstrapConfig, read_items
from polymnesia.metrics.translation import bleu, chrf
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.stages.evaluate_isotropy import EvaluateIsotropy, EvaluateIsotropyParams
from polymnesia.stages.evaluate_translation import (
    EvaluateTranslation,
    EvaluateTranslationParams,
    shifted,
)
from polymnesia.stages.evaluate_zero_shot import EvaluateZeroShot, EvaluateZeroShotParams

VERSES = {
    "en": [
        "the cat sat on the mat",
        "the dog ran to the cat",
        "a law of the land",
        "the mat is red",
        "the cat and the dog",
        "wisdom of the land",
    ],
    "fr": [
        "le chat est sur le tapis",
        "le chien court vers le chat",
        "une loi du pays",
        "le tapis est rouge",
        "le chat et le chien",
        "la sagesse du pays",
    ],
}
BOOT = BootstrapConfig(n_resamples=200)


@pytest.fixture(scope="module")
def folders(make_tok_model, tmp_path_factory):  # type: ignore[no-untyped-def]
    tok, model = make_tok_model([t for ts in VERSES.values() for t in ts])
    root = tmp_path_factory.mktemp("af_items")
    save_model_and_tokenizer(model, tok, root / "model" / "model")
    for lang, texts in VERSES.items():
        for split in ("train", "test"):
            write_jsonl_atomic(
                root / "data" / lang / f"{split}.jsonl",
                [
                    {"id": f"v{i}", "lang": lang, "text": t, "meta": {"genre": BIBLE_GENRES[i % 3]}}
                    for i, t in enumerate(texts)
                ],
            )
    return root


def _run(stage, params, root: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    out = tmp_path / "entry"
    out.mkdir()
    ctx = StageContext(
        StageSpec("s", "x", params), out, {"model": root / "model", "data": root / "data"}
    )
    return stage().run(ctx), read_items(out / "items.jsonl")


def test_zero_shot_items_reproduce_scores(folders, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    params = EvaluateZeroShotParams(
        label="BA", languages={"en": "pretraining", "fr": "adapting"}, bootstrap=BOOT
    )
    scores, items = _run(EvaluateZeroShot, params, folders, tmp_path)
    assert [(s.lang, s.kind, s.n, s.n_labels) for s in items] == [
        ("en", "label", 6, 9),
        ("fr", "label", 6, 9),
    ]
    assert items[0].ids == items[1].ids == [f"v{i}" for i in range(6)]  # aligned across languages
    assert items[0].columns["gold"] == [float(i % 3) for i in range(6)]
    for s in scores:
        it = next(i for i in items if i.lang == s.lang)
        assert it.statistic(s.metric).value() == pytest.approx(s.value)
        assert s.n == 6 and s.ci_low is not None and s.ci_low <= s.value <= s.ci_high  # type: ignore[operator]


def test_translation_items_reproduce_sacrebleu_and_floor(folders, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    params = EvaluateTranslationParams(
        label="AFA",
        languages={"en": "pretraining", "fr": "adapting"},
        shots=1,
        max_new_tokens=4,
        bootstrap=BOOT,
    )
    scores, items = _run(EvaluateTranslation, params, folders, tmp_path)
    (fr,) = items
    assert fr.lang == "fr" and fr.kind == "stats" and fr.n == 6
    assert len(fr.columns["stats"][0]) == 28 and len(fr.columns["floor_stats"]) == 6
    by_metric = {s.metric: s for s in scores}
    for metric in ("chrf", "bleu"):
        assert fr.statistic(metric).value() == pytest.approx(by_metric[metric].value, abs=1e-9)
        assert by_metric[metric].n == 6
    # the corpus scores are sacrebleu's on the same outputs
    hyp = by_metric["chrf"].extra["sample_hyp"]
    assert isinstance(hyp, str)
    assert by_metric["chrf"].extra["bleu_tokenize"] == "13a"
    assert by_metric["bleu"].extra["scale"] == "0-100"


def test_shifted_references_pair_each_output_with_another_verse() -> None:
    assert shifted(["a", "b", "c"]) == ["b", "c", "a"]
    hyps = refs = ["the cat sat on the mat today", "a dog ran in the park at night"]
    assert chrf(hyps, refs) == 100.0 and chrf(hyps, shifted(refs)) < 50
    assert bleu(hyps, shifted(refs)) < bleu(hyps, refs)


def test_isotropy_items_are_words_with_self_similarity(folders, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    params = EvaluateIsotropyParams(
        label="Baseline", languages={"en": "pretraining"}, bootstrap=BOOT
    )
    scores, items = _run(EvaluateIsotropy, params, folders, tmp_path)
    (en,) = items
    assert en.kind == "values" and en.extra["metric"] == "self_similarity_adjusted"
    assert set(en.ids) <= {"the", "cat", "dog", "mat", "land", "of"}  # words seen in >= 2 verses
    assert "the" in en.ids and "red" not in en.ids
    ss = next(s for s in scores if s.metric == "self_similarity_adjusted")
    assert en.statistic(ss.metric).value() == pytest.approx(ss.value, abs=1e-9)
    assert ss.n == en.n and ss.ci_low is not None
    other = next(s for s in scores if s.metric == "intra_sentence_similarity_adjusted")
    assert other.ci_low is None  # no per-item evidence for it
