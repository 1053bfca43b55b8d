"""Paper-layout tables on hand-made scores; every expected number is computed by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from polymnesia.errors import ConfigError, DataError
from polymnesia.reports.table_core import Estimate, number_text
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

GROUPS = {"pretraining": ["a", "b"], "adapting": ["c"], "other": ["d", "e", "f"]}


def sc(model: str, lang: str, value: float, **kw: object) -> Score:
    return Score(model, lang, "ppl", value, **kw)  # type: ignore[arg-type]


def test_group_table_overall_is_mean_over_languages_not_groups() -> None:
    # X: pretraining (1+3)/2 = 2, adapting 4, other (6+6+9)/3 = 7;
    # overall (1+3+4+6+6+9)/6 = 29/6, while the mean of group means is 13/3.
    scores = [sc("X", lang, v) for lang, v in zip("abcdef", [1, 3, 4, 6, 6, 9], strict=True)]
    t = group_table(scores, "ppl", GROUPS, block_by=None, higher_is_better=False)
    assert t.columns == ["Model", "mu_pretraining", "mu_adapting", "mu_other", "mu_overall"]
    assert t.rows == [["X", 2.0, 4.0, 7.0, pytest.approx(29 / 6)]]
    assert t.rows[0][4] != pytest.approx(13 / 3)
    assert t.caption == "No interval: one seed and no per-item data. (Lower is better)"
    assert t.name == "ppl" and t.block_column is None


def test_group_table_na_group_seed_averaging_and_model_order() -> None:
    # Y has no adapting language -> N/A; seeds of X on 'a' average to (0+2)/2 = 1 first.
    scores = [
        sc("X", "a", 0.0, seed=1),
        sc("X", "a", 2.0, seed=2),
        sc("X", "c", 4.0),
        sc("Y", "b", 2.0),
        sc("Y", "d", 8.0),
        sc("Y", "zz", 5.0),
    ]
    t = group_table(scores, "ppl", GROUPS, model_order=["Y", "X"], block_by=None, caption="C")
    y, x = t.rows
    assert y[:2] == ["Y", 2.0] and math.isnan(y[2]) and y[3] == 8.0
    assert y[4] == 5.0  # (2 + 8 + 5) / 3: an ungrouped language still counts in mu_overall
    assert x[0] == "X" and x[1].value == 1.0 and x[2] == 4.0 and math.isnan(x[3]) and x[4] == 2.5
    assert x[1].n == 2 and x[1].has_ci  # two seeds on 'a': a t-interval over seeds
    assert to_markdown(t).splitlines()[2] == "| Y | 2.000 | N/A | 8.000 | 5.000 |"
    # 'ppl' is not a registered metric: no direction note; the note says what ± means
    assert (
        t.caption == "C ± is half the width of the 95% confidence interval (Student t over seeds)."
    )


def test_group_table_size_blocks_ordered_by_params() -> None:
    scores = [
        sc("BA", "a", 3.0, size="1.6B", params=1_600_000_000),
        sc("Baseline", "a", 4.0, size="1.6B", params=1_600_000_000),
        sc("Baseline", "a", 5.0, size="400M", params=400_000_000),
    ]
    t = group_table(scores, "ppl", {"pretraining": ["a"]}, model_order=["Baseline", "BA"])
    assert t.rows == [
        ["400M"],
        ["Baseline", 5.0, 5.0],
        ["1.6B"],
        ["Baseline", 4.0, 4.0],
        ["BA", 3.0, 3.0],
    ]
    assert t.block_column == "size"
    md = to_markdown(t).splitlines()
    assert md[2] == "| Number of parameters = 400M |  |  |"
    assert md[4] == "| Number of parameters = 1.6B |  |  |"
    header, rows = to_csv_rows(t)
    assert header == ["size", "Model", "mu_pretraining", "mu_overall"]
    assert rows[0] == ["400M", "Baseline", "5.0", "5.0"]
    assert rows[2][:2] == ["1.6B", "BA"]


def test_size_label_from_params() -> None:
    assert human_params(400_000_000) == "400M" and human_params(1_600_000_000) == "1.6B"
    t = group_table([sc("M", "a", 1.0, params=125_000_000)], "ppl", {"g": ["a"]})
    assert t.rows[0] == ["125M"] and t.block_label(t.rows[0]) == "Number of parameters = 125M"


def test_group_table_errors() -> None:
    scores = [sc("X", "a", 1.0)]
    with pytest.raises(DataError, match="no scores for metric 'bleu'; present: ppl") as err:
        group_table(scores, "bleu", GROUPS)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="block_by 'seed' is not supported"):
        group_table(scores, "ppl", GROUPS, block_by="seed")
    mixed = [*scores, Score("X", "a", "ppl", 2.0, task="xnli")]
    with pytest.raises(DataError, match="several tasks"):
        group_table(mixed, "ppl", GROUPS)


def test_language_table_rows_columns_describe() -> None:
    names = {"a": ("Alpha", "Latn"), "c": ("Gamma", "Cyrl")}

    def describe(code: str) -> dict[str, str]:
        return dict(zip(("name", "script"), names.get(code, ("?", "?")), strict=True))

    scores = [sc("X", "c", 3.0), sc("Y", "a", 2.0), sc("X", "a", 1.0), sc("X", "zz", 9.0)]
    t = language_table(scores, "ppl", GROUPS, model_order=["X", "Y"], describe=describe)
    assert t.columns == ["Code", "Language", "Script", "Group", "X", "Y"]
    assert t.rows[0] == ["a", "Alpha", "Latn", "pretraining", 1.0, 2.0]
    assert t.rows[1][:5] == ["c", "Gamma", "Cyrl", "adapting", 3.0] and math.isnan(t.rows[1][5])
    assert t.rows[2][:5] == ["zz", "?", "?", "-", 9.0]
    assert len(t.rows) == 3 and t.name == "ppl_by_language"


def test_language_table_several_sizes_labels_columns() -> None:
    scores = [
        sc("X", "a", 1.0, size="1B", params=10**9),
        sc("X", "a", 2.0, size="1M", params=10**6),
    ]
    t = language_table(scores, "ppl", GROUPS)
    assert t.columns[4:] == ["X (1M)", "X (1B)"]
    assert t.rows == [["a", "", "", "pretraining", 2.0, 1.0]]


def test_seed_table_mean_std_marks_and_best() -> None:
    scores = [sc("M", "fr", v, seed=i) for i, v in enumerate([1.0, 2.0, 3.0])]
    scores += [sc("N", "fr", 4.0, seed=0), sc("N", "fr", 4.0, seed=1), sc("N", "de", 0.5, seed=0)]
    t = seed_table(scores, "ppl", marks={"M|fr": "●", "de": "*"}, best="max")
    assert t.columns == ["Model", "fr", "de"]
    assert texts(t) == [["M", "2.00±1.00●", "–"], ["N", "4.00±0.00", "0.50*"]]  # one seed: no ±
    assert t.bold == [(0, 1), (1, 1)]
    md = to_markdown(t).splitlines()
    assert md[2] == "| M | **2.00±1.00●** | – |"


def test_seed_table_setting_columns_average_languages_per_seed_first() -> None:
    # seed 1: (1+3)/2 = 2, seed 2: (3+5)/2 = 4 -> mean 3, sample std sqrt(2) = 1.41
    scores = [
        sc("LF", "fr", 1.0, seed=1, setting="S1"),
        sc("LF", "de", 3.0, seed=1, setting="S1"),
        sc("LF", "fr", 3.0, seed=2, setting="S1"),
        sc("LF", "de", 5.0, seed=2, setting="S1"),
    ]
    t = seed_table(scores, "ppl", col_key="setting")
    assert texts(t) == [["LF", "3.00±1.41"]]
    assert texts(seed_table(scores, "ppl", col_key="setting", ddof=0)) == [["LF", "3.00±1.00"]]
    lo, hi = (
        t.rows[0][1].low,
        t.rows[0][1].high,
    )  # the CSV's t-interval: 3 ± t(0.975, 1) * 1.41 / sqrt 2
    assert (lo, hi) == pytest.approx((3 - 12.706205, 3 + 12.706205))
    with pytest.raises(ConfigError, match="best 'top' is not supported"):
        seed_table(scores, "ppl", best="top")


def test_seed_table_keeps_several_tasks_apart_only_as_rows_or_columns() -> None:
    scores = [
        sc("LF", "fr", 1.0, seed=0, task="tag"),
        sc("LF", "fr", 3.0, seed=1, task="tag"),
        sc("LF", "fr", 5.0, seed=0, task="qa"),
        sc("LF", "fr", 7.0, seed=1, task="qa"),
    ]
    t = seed_table(scores, "ppl", col_key="task", col_order=["tag", "qa"])
    assert t.columns == ["Model", "tag", "qa"]
    assert texts(t) == [["LF", "2.00±1.41", "6.00±1.41"]]
    with pytest.raises(DataError, match="several tasks"):  # pooled into one cell: refused
        seed_table(scores, "ppl", col_key="setting")


def test_matrix_table_and_shape_error() -> None:
    t = matrix_table([[1, 2], [3, 4]], ["s1", "s2"], ["fr", "de"], "R", "Transfer", corner="step")
    assert t.columns == ["step", "fr", "de"]
    assert t.rows == [["s1", 1.0, 2.0], ["s2", 3.0, 4.0]]
    with pytest.raises(ConfigError, match=r"matrix is 2x2 but labels are 2x3") as err:
        matrix_table([[1, 2], [3, 4]], ["s1", "s2"], ["a", "b", "c"], "R", "T")
    assert "\n" not in str(err.value)


def texts(t: Table) -> list[list[str]]:
    return [[format_cell(c, t.floatfmt or ".3f") for c in row] for row in t.rows]


TWO_BY_TWO = Table(
    "t22", "Two by two", ["Model", "mu"], [["A", 1.0], ["B|x", math.nan]], caption="cap"
)


def test_to_markdown_exact() -> None:
    assert to_markdown(TWO_BY_TWO) == (
        "| Model | mu |\n|---|---|\n| A | 1.000 |\n| B\\|x | N/A |\n"
    )
    assert to_markdown(TWO_BY_TWO, floatfmt=".1f").splitlines()[2] == "| A | 1.0 |"
    blocked = Table("b", "", ["Model", "mu"], [["Number of parameters = 1M"], ["A", 2]])
    assert to_markdown(blocked).splitlines()[2:] == [
        "| Number of parameters = 1M |  |",
        "| A | 2 |",
    ]


def test_csv_rows_and_write_table_exact(tmp_path: Path) -> None:
    assert to_csv_rows(TWO_BY_TWO) == (["Model", "mu"], [["A", "1.0"], ["B|x", "N/A"]])
    csv_path, md_path = write_table(tmp_path / "results", TWO_BY_TWO)
    assert csv_path.read_text(encoding="utf-8") == "Model,mu\nA,1.0\nB|x,N/A\n"
    assert md_path.read_text(encoding="utf-8") == (
        "**Two by two**\n\n| Model | mu |\n|---|---|\n| A | 1.000 |\n| B\\|x | N/A |\n\n*cap*\n"
    )
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["t22.csv", "t22.md"]
    with pytest.raises(ConfigError, match="must be a plain file stem"):
        write_table(tmp_path, Table("../evil", "", ["a"], []))


def test_group_table_reproduces_paper_000_table1_overall() -> None:
    """400M Baseline of Aggarwal et al. 2024 Table 1: 25.041 / 31.440 / 34.663 over 12 / 14 / 24
    languages."""
    groups = {
        "pretraining": [f"p{i}" for i in range(12)],
        "adapting": [f"a{i}" for i in range(14)],
        "other": [f"o{i}" for i in range(24)],
    }
    values = dict.fromkeys(groups["pretraining"], 25.041)
    values |= dict.fromkeys(groups["adapting"], 31.440) | dict.fromkeys(groups["other"], 34.663)
    scores = [sc("Baseline", lang, v, params=400_000_000) for lang, v in values.items()]
    t = group_table(scores, "ppl", groups)
    assert to_markdown(t).splitlines()[3] == "| Baseline | 25.041 | 31.440 | 34.663 | 31.451 |"


def test_block_rows_in_csv_and_single_column_tables() -> None:
    blocked = Table("b", "", ["Model", "mu"], [["1M"], ["A", 2.0]], block_format="Size {}")
    assert to_csv_rows(blocked) == (["Model", "mu"], [["Size 1M", ""], ["A", "2.0"]])
    tidy = Table("b", "", ["Model", "mu"], [["1M"], ["A", 2.0]], block_column="size")
    assert to_csv_rows(tidy) == (["size", "Model", "mu"], [["1M", "A", "2.0"]])
    single = Table("s", "", ["lang"], [["en"], ["fr"]], block_column="size")
    assert not single.is_block_row(["en"])
    assert to_csv_rows(single) == (["size", "lang"], [["", "en"], ["", "fr"]])
    assert to_markdown(single).splitlines()[2:] == ["| en |", "| fr |"]


def test_seed_table_best_along_columns() -> None:
    scores = [sc("M", "fr", 1.0, seed=0), sc("N", "fr", 3.0, seed=0), sc("N", "de", 0.5, seed=0)]
    scores.append(sc("M", "de", 0.7, seed=0))
    t = seed_table(scores, "ppl", best="max", best_along="col")
    assert t.bold == [(0, 2), (1, 1)]  # de: M 0.7 > 0.5; fr: N 3.0 > 1.0
    assert seed_table(scores, "ppl", best="min", best_along="col").bold == [(0, 1), (1, 2)]
    with pytest.raises(ConfigError, match="best_along 'diag'"):
        seed_table(scores, "ppl", best_along="diag")


def test_huge_numbers_are_shown_in_scientific_notation_not_31_digits() -> None:
    """The quickstart's word perplexity of never-seen languages (2.6e30) printed 31 digits
    and pushed its table off a 1,280 px page; the CSV keeps full precision."""
    assert number_text(2.6438e30) == "2.644e+30" and number_text(999_999.5) == "999999.500"
    assert number_text(float("inf")) == "inf" and number_text(2e7, ",.0f") == "20,000,000"
    cell = Estimate(2.6438e30, 2.3e30, 2.9e30)
    t = Table("wppl", "Word perplexity", ["Model", "ppl"], [["Baseline", cell], ["BA", 4.0e9]])
    assert "2.644e+30 ± 3.000e+29" in to_markdown(t) and "4.000e+09" in to_markdown(t)
    assert to_csv_rows(t)[1][0][1] == repr(2.6438e30)
