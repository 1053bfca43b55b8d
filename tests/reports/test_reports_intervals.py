"""Tables with uncertainty: "value ± half-width", CI columns in the CSV, one seed without
"±0.00".
"""

from __future__ import annotations

import math

import pytest

from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.tables import (
    Estimate,
    group_table,
    language_table,
    seed_table,
    to_csv_rows,
    to_markdown,
)
from polymnesia.results import Score

GROUPS = {"g1": ["a", "b"], "g2": ["c"]}
Z = 1.959964


def acc(model: str, lang: str, value: float, half: float | None = None, **kw: object) -> Score:
    ci = {} if half is None else {"ci_low": value - half, "ci_high": value + half, "n": 100}
    return Score(model, lang, "accuracy", value, task="genre", **ci, **kw)  # type: ignore[arg-type]


def test_estimate_text_and_csv_columns() -> None:
    assert Estimate(0.5, 0.4, 0.6, 80).text() == "0.500 ± 0.100"
    assert Estimate(0.5).text() == "0.500"  # no interval: the value alone
    assert Estimate(0.5, 0.1, 0.9, 3, spread=0.2, mark="●").text(".2f") == "0.50±0.20●"
    assert Estimate(math.nan).text() == "N/A"
    assert Estimate.of(Interval(0.5, 0.45, 0.6, 9)).half_width == pytest.approx(0.075)


def test_group_table_combines_language_intervals_with_one_seed() -> None:
    scores = [
        acc("M", "a", 0.4, Z * 0.03),
        acc("M", "b", 0.6, Z * 0.04),
        acc("M", "c", 0.5, Z * 0.05),
    ]
    t = group_table(scores, "accuracy", GROUPS, block_by=None)
    g1, g2, overall = t.rows[0][1:]
    # the group mean's standard error: sqrt(0.03² + 0.04²) / 2 = 0.025
    assert g1.value == pytest.approx(0.5) and g1.half_width == pytest.approx(Z * 0.025)
    assert g2.half_width == pytest.approx(Z * 0.05) and g2.n == 100
    assert overall.n == 300
    assert to_markdown(t).splitlines()[2] == "| M | 0.500 ± 0.049 | 0.500 ± 0.098 | 0.500 ± 0.046 |"
    assert "normal approximation" in t.caption
    header, rows = to_csv_rows(t)
    assert header[:5] == ["Model", "mu_g1", "mu_g1_ci_low", "mu_g1_ci_high", "mu_g1_n"]
    assert (
        rows[0][1] == "0.5"
        and float(rows[0][2]) == pytest.approx(0.5 - Z * 0.025)
        and rows[0][4] == "200"
    )


def test_group_table_prefers_given_intervals_then_seeds() -> None:
    scores = [acc("M", "a", 0.4), acc("M", "b", 0.6), acc("M", "c", 0.5)]
    given = {
        ("M", None, "g1"): Interval(0.5, 0.45, 0.55, 60, method="stratified percentile bootstrap")
    }
    t = group_table(scores, "accuracy", GROUPS, block_by=None, intervals=given)
    g1, g2, _ = t.rows[0][1:]
    assert (g1.low, g1.high, g1.n) == (0.45, 0.55, 60) and g2 == 0.5  # g2 has no interval at all
    assert "resampled within each language" in t.caption
    seeds = [
        acc("M", lang, v + 0.1 * k, seed=k) for k in (0, 1) for lang, v in (("a", 0.4), ("c", 0.5))
    ]
    g1 = group_table(seeds, "accuracy", GROUPS, block_by=None, intervals=given).rows[0][1]
    assert g1.n == 2 and g1.value == pytest.approx(0.45)  # seeds win over item intervals


def test_group_table_without_any_interval_says_so() -> None:
    t = group_table([acc("M", "a", 0.4)], "accuracy", GROUPS, block_by=None)
    assert t.rows[0][1] == 0.4 and "±" not in to_markdown(t)
    assert t.caption.startswith("No interval: one seed and no per-item data.")


def test_size_blocks_show_parameter_counts() -> None:
    scores = [
        acc("Baseline", "a", 0.4, size="base", params=620_000),
        acc("AFA", "a", 0.5, size="base", params=750_000),
    ]
    t = group_table(scores, "accuracy", GROUPS)
    assert t.block_label(t.rows[0]) == "Number of parameters = 620K–750K (base)"
    assert to_csv_rows(t)[1][0][0] == "base"  # the CSV keeps the raw size


def test_language_table_cells_carry_record_intervals() -> None:
    t = language_table([acc("M", "a", 0.4, 0.05), acc("M", "c", 0.5)], "accuracy", GROUPS)
    assert to_markdown(t).splitlines()[2:] == [
        "| a |  |  | g1 | 0.400 ± 0.050 |",
        "| c |  |  | g2 | 0.500 |",
    ]
    assert "bootstrap over test items" in t.caption


def test_seed_table_with_one_seed_drops_marks_and_legend() -> None:
    scores = [acc("LF-MLF", "x", 0.5, 0.04, seed=0), acc("Uniform", "x", 0.4, 0.05, seed=0)]
    t = seed_table(
        scores,
        "accuracy",
        marks={"Uniform": "●"},
        legend="● LF-MLF significantly better.",
        caption="Zero-shot.",
    )
    cells = [to_markdown(t).splitlines()[i] for i in (2, 3)]
    assert cells == ["| LF-MLF | 0.50 ± 0.04 |", "| Uniform | 0.40 ± 0.05 |"]
    assert (
        "●" not in t.caption
        and "One seed: no spread over seeds and no significance test." in t.caption
    )
    assert t.title == "accuracy (one seed)"


def test_seed_table_one_seed_uses_given_cell_intervals() -> None:
    scores = [acc("M", "fr", 0.4, seed=0, setting="s"), acc("M", "de", 0.6, seed=0, setting="s")]
    iv = {("M", "s"): Interval(0.5, 0.42, 0.58, 200, method="stratified percentile bootstrap")}
    t = seed_table(scores, "accuracy", col_key="setting", intervals=iv)
    assert t.rows[0][1] == Estimate(0.5, 0.42, 0.58, 200, method="stratified percentile bootstrap")
    plain = seed_table(scores, "accuracy", col_key="setting")
    assert to_markdown(plain).splitlines()[2] == "| Model | 0.50 |".replace("Model", "M")
