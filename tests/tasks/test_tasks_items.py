"""Per-example columns from evaluate_items_by_language reproduce the reported scores."""

from __future__ import annotations

import pytest
from tasks_helpers import record  # type: ignore[import-not-found]

from polymnesia.items import ItemSet
from polymnesia.tasks.classification import (
    build_sequence_examples,
    evaluate_by_language,
    evaluate_items_by_language,
    load_classifier,
)
from polymnesia.tasks.tagging import build_token_examples, language_id_tagging


def _items(lang, r):  # type: ignore[no-untyped-def]
    return ItemSet("m", lang, r.kind, r.ids, r.columns, n_labels=r.n_labels)


@pytest.mark.parametrize("metric", ["accuracy", "macro_f1"])
def test_sequence_items_reproduce_scores(lm_folder, metric: str) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    texts = ["the earth", "God created the heavens", "void", "the deep", "Erde", "Himmel"]
    en = build_sequence_examples([record(i, "en", t, i % 3) for i, t in enumerate(texts)], tok, 32)
    de = build_sequence_examples([record(i, "de", "die Erde", 1) for i in range(3)], tok, 32)
    got = evaluate_items_by_language(model, {"en": en, "de": de}, metric=metric)
    plain = evaluate_by_language(model, {"en": en, "de": de}, metric=metric)
    for lang, r in got.items():
        assert r.value == plain[lang]
        assert r.kind == "label" and r.n_labels == 3
        assert r.ids == [e["id"] for e in {"en": en, "de": de}[lang]]
        assert _items(lang, r).statistic(metric).value() == pytest.approx(r.value)


@pytest.mark.parametrize("metric", ["accuracy", "span_f1"])
def test_token_items_reproduce_scores(lm_folder, metric: str) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=5, kind="token")
    a = [
        record(i, "en", t, 0) for i, t in enumerate(["the earth was void", "and darkness was upon"])
    ]
    b = [record(i, "de", t, 0) for i, t in enumerate(["die Erde war leer", "und Finsternis war"])]
    recs = language_id_tagging(a, b, seed=1, scheme="bio")
    ex = build_token_examples(recs, tok, 64)
    names = recs[0]["meta"]["tag_names"]
    got = evaluate_items_by_language(model, {"x": ex}, kind="token", metric=metric, tag_names=names)
    r = got["x"]
    assert r.kind == "token" and len(r.ids) == len(ex)
    assert _items("x", r).statistic(metric).value() == pytest.approx(r.value)
