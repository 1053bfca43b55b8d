"""Score records: dict round trip, validation errors, JSONL files and the list helpers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from polymnesia.errors import ConfigError, DataError
from polymnesia.results import (
    Score,
    append_scores,
    filter_scores,
    group_scores,
    mean,
    ordered,
    pivot_mean,
    read_scores,
    score_from_dict,
    scores_to_rows,
    std,
    unique,
    write_scores,
)

FULL = Score(
    "BA",
    "fr",
    "ppl",
    12.5,
    task="lm",
    group="adapting",
    size="400M",
    params=400_000_000,
    seed=3,
    step=100,
    setting="order-a",
    extra={"n_tokens": 42},
)


def test_to_dict_drops_none_and_empty_extra() -> None:
    assert Score("BA", "fr", "ppl", 1.0).to_dict() == {
        "model": "BA",
        "lang": "fr",
        "metric": "ppl",
        "value": 1.0,
        "task": "lm",
    }


def test_round_trip_every_field() -> None:
    assert score_from_dict(FULL.to_dict()) == FULL
    assert score_from_dict(json.loads(json.dumps(FULL.to_dict()))) == FULL


def test_int_value_becomes_float() -> None:
    s = score_from_dict({"model": "a", "lang": "fr", "metric": "m", "value": 3})
    assert s.value == 3.0 and isinstance(s.value, float)


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        (
            {"model": "a", "lang": "fr", "metric": "m", "value": 1, "colour": 1},
            "unknown field(s) colour",
        ),
        ({"model": "a", "lang": "fr", "value": 1}, "missing required field(s) metric"),
        ({"model": "a", "lang": "fr", "metric": "m", "value": "1"}, "'value' must be a number"),
        ({"model": "a", "lang": "fr", "metric": "m", "value": True}, "'value' must be a number"),
        ({"model": 1, "lang": "fr", "metric": "m", "value": 1}, "'model' must be a string"),
        (
            {"model": "a", "lang": "fr", "metric": "m", "value": 1, "seed": 1.5},
            "'seed' must be an integer",
        ),
        (
            {"model": "a", "lang": "fr", "metric": "m", "value": 1, "extra": [1]},
            "'extra' must be a mapping",
        ),
    ],
)
def test_bad_records_give_one_line_errors(record: dict[str, object], needle: str) -> None:
    with pytest.raises(DataError) as err:
        score_from_dict(record, "rec 7")
    msg = str(err.value)
    assert needle in msg and msg.startswith("rec 7: ") and "\n" not in msg


def test_write_read_round_trip_atomic(tmp_path: Path) -> None:
    path = tmp_path / "results" / "scores.jsonl"
    scores = [FULL, Score("Baseline", "de", "ppl", 2.0)]
    write_scores(path, scores)
    assert read_scores(path) == scores
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    write_scores(path, scores[:1])  # replaces, does not append
    assert read_scores(path) == [FULL]
    assert sorted(p.name for p in path.parent.iterdir()) == ["scores.jsonl"]


def test_append_and_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    append_scores(path, [Score("a", "fr", "m", 1.0)])
    append_scores(path, [Score("a", "de", "m", 2.0)])
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"model": "a", "la')  # a crash mid-write
    assert [s.lang for s in read_scores(path)] == ["fr", "de"]


def test_read_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no scores file at"):
        read_scores(tmp_path / "absent.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"model": "a", "lang": "fr", "metric": "m"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"record 1: missing required field\(s\) value"):
        read_scores(bad)


S = [
    Score("A", "fr", "ppl", 1.0, seed=1),
    Score("A", "fr", "ppl", 3.0, seed=2),
    Score("A", "de", "ppl", 5.0, seed=1),
    Score("B", "fr", "ppl", 7.0, seed=1),
    Score("B", "fr", "acc", 0.5, seed=1),
]


def test_filter_scores() -> None:
    assert filter_scores(S, model="B", metric="ppl") == [S[3]]
    assert filter_scores(S, lang=["de", "xx"]) == [S[2]]
    assert filter_scores(S, seed={2}) == [S[1]]
    assert filter_scores(S) == S
    with pytest.raises(ConfigError, match="unknown score field 'modle'; accepted: model, lang"):
        filter_scores(S, modle="A")


def test_unique_group_pivot() -> None:
    assert unique(S, "model") == ["A", "B"]
    assert unique(S, "step") == [None]
    assert list(group_scores(S, "model", "lang")) == [("A", "fr"), ("A", "de"), ("B", "fr")]
    assert pivot_mean(filter_scores(S, metric="ppl"), "model", "lang") == {
        ("A", "fr"): 2.0,
        ("A", "de"): 5.0,
        ("B", "fr"): 7.0,
    }
    assert pivot_mean(S, "model", "metric", agg=len) == {
        ("A", "ppl"): 3,
        ("B", "ppl"): 1,
        ("B", "acc"): 1,
    }
    assert scores_to_rows(S[:1])[0]["extra"] == {} and scores_to_rows(S[:1])[0]["seed"] == 1


def test_mean_std_ordered() -> None:
    assert mean([1.0, 2.0, 6.0]) == 3.0 and math.isnan(mean([]))
    assert std([1.0, 2.0, 3.0]) == 1.0
    assert std([1.0, 3.0], ddof=0) == 1.0
    assert std([4.0]) == 0.0 and math.isnan(std([]))
    assert ordered(["x", "b", "a", "b"], ["a", "zz", "b"]) == ["a", "b", "x"]
    assert ordered(["x", "a"], None) == ["x", "a"]
