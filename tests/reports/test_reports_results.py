"""Score records: JSONL round trip, validation, selection helpers."""

from __future__ import annotations

import math

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

SCORES = [
    Score("BA", "fr", "ppl", 10.0, params=400_000_000, seed=0),
    Score("BA", "de", "ppl", 12.0, params=400_000_000, seed=0, extra={"n_tokens": 5}),
    Score("AFA", "fr", "ppl", 8.0, group="adapting", size="400M", step=3, setting="order1"),
]


def test_write_read_round_trip_and_no_temp_files(tmp_path):
    path = tmp_path / "results" / "scores.jsonl"
    write_scores(path, SCORES)
    assert read_scores(path) == SCORES
    assert sorted(p.name for p in path.parent.iterdir()) == ["scores.jsonl"]


def test_to_dict_drops_empty_fields():
    assert SCORES[0].to_dict() == {
        "model": "BA",
        "lang": "fr",
        "metric": "ppl",
        "value": 10.0,
        "task": "lm",
        "params": 400_000_000,
        "seed": 0,
    }


def test_append_adds_and_skips_torn_line(tmp_path):
    path = tmp_path / "scores.jsonl"
    append_scores(path, SCORES[:1])
    append_scores(path, SCORES[1:])
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"model": "BA", "lang"')  # a crash mid-write
    assert read_scores(path) == SCORES


def test_read_missing_file_is_one_line_error(tmp_path):
    with pytest.raises(DataError, match="no scores file"):
        read_scores(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"model": "a", "lang": "fr", "metric": "m", "value": 1, "colour": 1}, "unknown field"),
        ({"model": "a", "lang": "fr", "metric": "m"}, "missing required field"),
        ({"model": "a", "lang": "fr", "metric": "m", "value": "1"}, "must be a number"),
        ({"model": "a", "lang": "fr", "metric": "m", "value": 1, "seed": 1.5}, "integer"),
        ({"model": 3, "lang": "fr", "metric": "m", "value": 1}, "must be a string"),
    ],
)
def test_invalid_records_are_rejected(record, message):
    with pytest.raises(DataError, match=message):
        score_from_dict(record)


def test_int_value_becomes_float():
    assert score_from_dict({"model": "a", "lang": "fr", "metric": "m", "value": 2}).value == 2.0


def test_filter_equality_and_membership():
    assert filter_scores(SCORES, model="BA", lang="de") == [SCORES[1]]
    assert filter_scores(SCORES, lang=["fr"]) == [SCORES[0], SCORES[2]]
    with pytest.raises(ConfigError, match="unknown score field 'langs'"):
        filter_scores(SCORES, langs="fr")


def test_unique_group_pivot():
    assert unique(SCORES, "model") == ["BA", "AFA"]
    assert list(group_scores(SCORES, "model")) == [("BA",), ("AFA",)]
    assert pivot_mean(SCORES, "model", "metric") == {("BA", "ppl"): 11.0, ("AFA", "ppl"): 8.0}
    rows = scores_to_rows(SCORES)
    assert rows[1]["extra"] == {"n_tokens": 5} and rows[0]["group"] is None


def test_mean_std_ordered():
    assert mean([1.0, 2.0, 3.0]) == 2.0 and math.isnan(mean([]))
    assert std([1.0, 2.0, 3.0]) == 1.0
    assert std([1.0, 3.0], ddof=0) == 1.0
    assert std([5.0]) == 0.0
    assert ordered(["c", "a", "b"], ["b", "z", "c"]) == ["b", "c", "a"]
