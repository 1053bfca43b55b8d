"""lm-eval's per-document samples as item sets: hand-made results, hand-checked means."""

from __future__ import annotations

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.harness.items import samples_to_items


def _row(doc: int, flt: str = "none", **metrics: object) -> dict[str, object]:
    return {
        "doc_id": doc,
        "doc_hash": f"h{doc}",
        "filter": flt,
        "metrics": list(metrics),
        **metrics,
    }


def test_a_column_per_metric_whose_mean_is_lm_evals_score() -> None:
    results = {
        "results": {
            "poly_genre_en": {"acc,none": 2 / 3, "acc_norm,none": 1 / 3, "bleu,none": 0.9},
            "xnli_de": {"acc,none": 0.5, "acc,strict": 1.0},
        },
        "samples": {
            # bleu is a corpus score: its per-document values do not average to it
            "poly_genre_en": [
                _row(2, acc=1.0, acc_norm=0.0, bleu=0.1),
                _row(0, acc=1.0, acc_norm=1.0, bleu=0.2),
                _row(1, acc=0.0, acc_norm=0.0, bleu=0.3),
            ],
            "xnli_de": [
                _row(0, acc=True),
                _row(1, acc=False),
                _row(0, "strict", acc=1.0),
                _row(1, "strict", acc=1.0),
            ],
        },
    }
    genre, xnli = samples_to_items(results, "P1", seed=0)
    assert (genre.kind, genre.task, genre.lang, genre.seed) == ("docs", "poly_genre_en", "en", 0)
    assert genre.ids == ["h0", "h1", "h2"]  # sorted by doc_id, named by content hash
    assert genre.columns == {"acc": [1.0, 0.0, 1.0], "acc_norm": [1.0, 0.0, 0.0]}
    assert genre.statistic("acc").value() == pytest.approx(2 / 3)
    with pytest.raises(PolymnesiaError, match="'bleu' is not among these documents' columns"):
        genre.statistic("bleu")
    assert xnli.lang == "de" and xnli.columns == {"acc": [1.0, 0.0], "acc/strict": [1.0, 1.0]}


def test_no_samples_no_items() -> None:
    assert samples_to_items({"results": {"t": {"acc,none": 1.0}}}, "P1") == []


def test_multiple_choice_documents_keep_their_chance_accuracy() -> None:
    """One request per choice in ``arguments``: chance 1/4 and 1/2; a single loglikelihood
    request (one argument) is not a choice, and such a task gets no chance column."""
    results = {
        "results": {"belebele_x": {"acc,none": 0.5}, "lambada_x": {"acc,none": 1.0}},
        "samples": {
            "belebele_x": [
                {
                    **_row(0, acc=1.0),
                    "arguments": [["q", " a"], ["q", " b"], ["q", " c"], ["q", " d"]],
                },
                {**_row(1, acc=0.0), "arguments": [["q", " yes"], ["q", " no"]]},
            ],
            "lambada_x": [{**_row(0, acc=1.0), "arguments": [["ctx", " word"]]}],
        },
    }
    mc, single = samples_to_items(results, "P1")
    assert mc.columns["chance"] == [0.25, 0.5]
    assert "chance" not in single.columns and single.columns == {"acc": [1.0]}
