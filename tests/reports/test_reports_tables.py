"""Paper-layout tables: hand-computed means, exact Markdown/CSV, seed statistics."""

from __future__ import annotations

import csv

import pytest

from polymnesia.errors import ConfigError, DataError
from polymnesia.reports.tables import (
    Table,
    format_cell,
    group_table,
    human_params,
    language_table,
    matrix_table,
    seed_table,
    to_csv_rows,
    to_markdown,
    write_table,
)
from polymnesia.results import Score

GROUPS = {"pre": ["a", "b"], "ad": ["c"], "oth": ["d", "e", "f"], "none": ["z"]}


def _scores(model: str, values: dict[str, float], **kw) -> list[Score]:
    return [Score(model, lang, "acc", v, **kw) for lang, v in values.items()]


def test_group_table_hand_computed_overall_is_not_mean_of_groups():
    scores = _scores("M", {"a": 1.0, "b": 3.0, "c": 5.0, "d": 7.0, "e": 11.0})
    t = group_table(scores, "acc", GROUPS, higher_is_better=True)
    assert t.columns == ["Model", "mu_pre", "mu_ad", "mu_oth", "mu_none", "mu_overall"]
    # pre (1+3)/2, ad 5, oth (7+11)/2; overall 27/5 = 5.4, not (2+5+9)/3 = 5.333
    assert t.rows == [["M", 2.0, 5.0, 9.0, pytest.approx(float("nan"), nan_ok=True), 5.4]]
    assert to_markdown(t).splitlines()[2] == "| M | 2.000 | 5.000 | 9.000 | N/A | 5.400 |"
    assert t.caption == "(Higher is better)" and t.block_column is None


def test_group_table_reproduces_paper_000_table1_overall():
    """400M Baseline of Table 1: group means 25.041/31.440/34.663 -> mu_overall 31.451."""
    groups = {
        "pretraining": [f"p{i}" for i in range(12)],
        "adapting": [f"a{i}" for i in range(14)],
        "other": [f"o{i}" for i in range(24)],
    }
    values = {**dict.fromkeys(groups["pretraining"], 25.041)}
    values |= dict.fromkeys(groups["adapting"], 31.440) | dict.fromkeys(groups["other"], 34.663)
    t = group_table(_scores("Baseline", values, params=400_000_000), "acc", groups)
    assert to_markdown(t).splitlines()[3] == "| Baseline | 25.041 | 31.440 | 34.663 | 31.451 |"


def test_group_table_blocks_by_size_orders_models_and_averages_seeds():
    scores = (
        _scores("BA", {"a": 2.0}, params=1_600_000_000)
        + _scores("BA", {"a": 1.0}, params=400_000_000, seed=0)
        + _scores("BA", {"a": 3.0}, params=400_000_000, seed=1)
        + _scores("Baseline", {"a": 4.0, "c": 6.0}, params=400_000_000)
    )
    t = group_table(scores, "acc", {"pre": ["a"], "ad": ["c"]}, model_order=["Baseline", "BA"])
    md = to_markdown(t).splitlines()
    assert md[2] == "| Number of parameters = 400M |  |  |  |"
    assert md[3] == "| Baseline | 4.000 | 6.000 | 5.000 |"
    assert md[4] == "| BA | 2.000 | N/A | 2.000 |"
    assert md[5] == "| Number of parameters = 1.6B |  |  |  |"
    header, rows = to_csv_rows(t)
    assert header == ["size", "Model", "mu_pre", "mu_ad", "mu_overall"]
    assert rows[1] == ["400M", "BA", "2.0", "N/A", "2.0"]
    assert rows[2] == ["1.6B", "BA", "2.0", "N/A", "2.0"]


def test_group_table_errors():
    scores = _scores("M", {"a": 1.0}) + [Score("M", "a", "acc", 2.0, task="xnli")]
    with pytest.raises(DataError, match="several tasks"):
        group_table(scores, "acc", GROUPS)
    with pytest.raises(DataError, match="no scores for metric 'bleu'; present: acc"):
        group_table(scores, "bleu", GROUPS)
    with pytest.raises(ConfigError, match="block_by"):
        group_table(scores, "acc", GROUPS, block_by="seed")


def test_language_table_rows_in_group_order_with_describe():
    scores = _scores("A", {"c": 3.0, "a": 1.0, "q": 9.0}) + _scores("B", {"a": 2.0})
    names = {"a": {"name": "Alpha", "script": "Latn"}}
    t = language_table(scores, "acc", GROUPS, describe=lambda c: names.get(c, {}))
    assert t.columns == ["Code", "Language", "Script", "Group", "A", "B"]
    md = to_markdown(t).splitlines()[2:]
    assert md == [
        "| a | Alpha | Latn | pre | 1.000 | 2.000 |",
        "| c |  |  | ad | 3.000 | N/A |",
        "| q |  |  | - | 9.000 | N/A |",
    ]


def test_language_table_labels_sizes_when_several():
    scores = _scores("A", {"a": 1.0}, size="S") + _scores("A", {"a": 2.0}, size="L")
    assert language_table(scores, "acc", GROUPS).columns[4:] == ["A (S)", "A (L)"]


def test_seed_table_mean_std_marks_and_best():
    scores = (
        _scores("M1", {"en": 1.0}, seed=0)
        + _scores("M1", {"en": 2.0}, seed=1)
        + _scores("M1", {"en": 3.0}, seed=2)
        + _scores("M2", {"en": 5.0, "de": 4.0}, seed=0)
    )
    t = seed_table(scores, "acc", marks={"M1": "●", "M2|de": "†"}, best="max")
    assert t.columns == ["Model", "en", "de"]
    assert t.rows == [["M1", "2.00±1.00●", "–"], ["M2", "5.00±0.00", "4.00±0.00†"]]
    assert t.bold == [(0, 1), (1, 1)]
    assert to_markdown(t).splitlines()[3] == "| M2 | **5.00±0.00** | 4.00±0.00† |"


def test_seed_table_averages_languages_within_a_seed_first():
    scores = _scores("M", {"x": 1.0, "y": 3.0}, seed=0, setting="zs") + _scores(
        "M", {"x": 3.0, "y": 5.0}, seed=1, setting="zs"
    )
    t = seed_table(scores, "acc", row_key="setting", col_key="model", floatfmt=".3f")
    assert t.rows == [["zs", "3.000±1.414"]]  # per-seed means 2 and 4
    with pytest.raises(ConfigError, match="best"):
        seed_table(scores, "acc", best="top")


def test_markdown_and_csv_exact_output(tmp_path):
    t = Table(
        name="demo",
        title="Demo",
        columns=["Model", "x|y", "n"],
        rows=[["blk"], ["A", 0.12345, 3], ["B", None, 4]],
        caption="A caption.",
        block_column="size",
        block_format="Size = {}",
    )
    assert to_markdown(t, ".2f") == (
        "| Model | x\\|y | n |\n|---|---|---|\n| Size = blk |  |  |\n| A | 0.12 | 3 |\n| B | N/A | 4 |\n"
    )
    csv_path, md_path = write_table(tmp_path, t)
    assert csv_path.read_text() == "size,Model,x|y,n\nblk,A,0.12345,3\nblk,B,N/A,4\n"
    with open(csv_path, newline="") as f:
        assert next(csv.reader(f)) == ["size", "Model", "x|y", "n"]
    assert md_path.read_text().startswith("**Demo**\n\n| Model |")
    assert md_path.read_text().endswith("*A caption.*\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.csv", "demo.md"]
    with pytest.raises(ConfigError, match="plain file stem"):
        write_table(tmp_path, Table("../x", "", ["a"], []))


def test_matrix_table_and_shape_check():
    t = matrix_table([[1, 0.5], [0.25, 1]], ["after fr", "after de"], ["fr", "de"], "R", "R")
    assert to_markdown(t, ".2f").splitlines()[2:] == [
        "| after fr | 1.00 | 0.50 |",
        "| after de | 0.25 | 1.00 |",
    ]
    with pytest.raises(ConfigError, match="matrix is 2x2 but labels are 1x2"):
        matrix_table([[1, 2], [3, 4]], ["r"], ["a", "b"], "R", "R")


def test_format_helpers():
    assert human_params(400_000_000) == "400M"
    assert human_params(1_600_000_000) == "1.6B"
    assert human_params(782_000_000) == "782M"
    assert human_params(999) == "999"
    assert format_cell(float("nan")) == "N/A" and format_cell(True) == "True"
