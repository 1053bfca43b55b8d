"""polymnesia compare: tables of runs of one protocol side by side, intervals kept; protocols
checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.errors import PolymnesiaError
from polymnesia.reports.compare import compare_runs, read_table_csv, write_comparison
from polymnesia.reports.table_core import Estimate, to_markdown, write_table
from polymnesia.reports.tables import group_table, language_table
from polymnesia.results import Score

GROUPS = {"source": ["en"], "target": ["fr", "de"]}


def make_run(root: Path, name: str, shift: float, protocol: str = "lf_mlf") -> Path:
    run = root / name
    (run / "results").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"experiment": protocol, "name": name}))
    scores = [
        Score(
            m,
            lang,
            "accuracy",
            v + shift,
            task="genre",
            ci_low=v + shift - 0.05,
            ci_high=v + shift + 0.05,
            n=200,
        )
        for m, base in (("LF-MLF", 0.5), ("Uniform", 0.4))
        for lang, v in (("en", base), ("fr", base - 0.2), ("de", base - 0.1))
    ]
    if name == "gpu":
        scores.append(Score("PCGrad", "en", "accuracy", 0.7, task="genre"))
    write_table(
        run / "results",
        group_table(scores, "accuracy", GROUPS, name="zero_shot", title="Table 1: zero-shot"),
    )
    write_table(run / "results", language_table(scores, "accuracy", GROUPS))
    return run


def test_read_table_csv_restores_intervals(tmp_path: Path) -> None:
    run = make_run(tmp_path, "laptop", 0.0)
    columns, rows = read_table_csv(run / "results" / "zero_shot.csv")
    assert columns == ["Model", "mu_source", "mu_target", "mu_overall"]
    assert rows[0][0] == "LF-MLF" and rows[0][1] == Estimate(0.5, 0.45, 0.55, 200)


def test_compare_two_runs_side_by_side(tmp_path: Path) -> None:
    a, b = make_run(tmp_path, "laptop", 0.0), make_run(tmp_path, "gpu", 0.1)
    rep = compare_runs([a, b])
    tables = [s.payload for s in rep.sections if s.kind == "table"]
    assert [t.name for t in tables] == ["zero_shot"]  # per-language tables left out by default
    t = tables[0]
    assert t.columns[:3] == ["Model", "mu_source [laptop]", "mu_source [gpu]"]
    lines = to_markdown(t).splitlines()
    assert lines[2].startswith("| LF-MLF | 0.500 ± 0.050 | 0.600 ± 0.050 |")
    assert lines[4].startswith("| PCGrad | – | 0.700 |")  # a row only the gpu run has
    md, page = write_comparison(
        [a, b], tmp_path / "cmp", tables=["zero_shot", "accuracy_by_language"]
    )
    assert "## Table 1: zero-shot" in md.read_text() and page.name == "compare.html"
    assert "accuracy by language" in md.read_text()


def test_compare_refuses_mixed_protocols_in_one_line(tmp_path: Path) -> None:
    a, b = make_run(tmp_path, "a", 0.0), make_run(tmp_path, "b", 0.0, protocol="lifelong")
    with pytest.raises(PolymnesiaError, match="different protocols") as err:
        compare_runs([a, b])
    assert "\n" not in str(err.value)
    with pytest.raises(PolymnesiaError, match="at least two"):
        compare_runs([a])


def test_compare_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = make_run(tmp_path, "laptop", 0.0), make_run(tmp_path, "gpu", 0.1)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "mu_overall [gpu]" in out and (tmp_path / "out" / "compare.html").is_file()
    c = make_run(tmp_path, "other", 0.0, protocol="active_forgetting")
    assert main(["compare", str(a), str(c)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "polymnesia: error: cannot compare runs of different protocols"
    )


def test_counts_read_back_as_counts(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("Model,Score,n,steps\nA,0.356,498,-3\n", encoding="utf-8")
    columns, rows = read_table_csv(path)
    assert columns == ["Model", "Score", "n", "steps"]
    assert rows == [["A", 0.356, 498, -3]]
    assert [type(v) for v in rows[0]] == [str, float, int, int]


def _run_with_items(
    root: Path, name: str, values: dict[str, list[float]], ids: list[str], seeds=(0,)
) -> Path:
    """A run folder whose arm M scored per-item values (ids shared by every language)."""
    from polymnesia.items import ItemSet, write_items
    from polymnesia.results import write_scores

    run = root / name
    (run / "results").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"experiment": "lf_mlf", "name": name}))
    scores, sets = [], []
    for seed in seeds:
        for lang, vals in values.items():
            shifted = [v + 0.1 * seed for v in vals]
            sets.append(
                ItemSet(
                    "M", lang, "values", ids, {"values": shifted}, task="t", seed=seed, stage="ft"
                )
            )
            value = sum(shifted) / len(shifted)
            scores.append(
                Score(
                    "M",
                    lang,
                    "f1",
                    value,
                    task="t",
                    seed=seed,
                    ci_low=value - 0.1,
                    ci_high=value + 0.1,
                    n=len(ids),
                )
            )
    write_scores(run / "results" / "scores.jsonl", scores)
    write_table(run / "results", group_table(scores, "f1", {"all": ["en"]}, name="main", title="t"))
    write_items(run / "results" / "items.jsonl", sets)  # as the runner merges them
    return run


def test_compare_tests_an_arm_item_by_item_across_runs(tmp_path: Path) -> None:
    from polymnesia.reports.run_differences import differences_table

    ids = ["a", "b", "c", "d"]
    ref = _run_with_items(tmp_path, "ref", {"en": [1, 0, 0, 1], "fr": [0, 0, 1, 1]}, ids)
    new = _run_with_items(
        tmp_path, "new", {"en": [1, 1, 0, 1], "fr": [1, 1, 1, 1], "de": [0] * 4}, ids
    )
    other_items = _run_with_items(tmp_path, "elsewhere", {"en": [1, 1, 1, 1]}, ["w", "x", "y", "z"])
    found = differences_table([ref, new, other_items], ["ref", "new", "elsewhere"])
    table = found.table
    assert table is not None and len(table.rows) == 1 and found.identical == 0
    # no common item with "elsewhere": said, not a traceback
    assert len(found.untested) == 1 and "share no test item" in found.untested[0]
    twice = differences_table([ref, ref], ["ref", "again"])  # the same run twice
    assert (twice.table, twice.identical, twice.untested) == (None, 1, [])
    model, task, group, setting, metric, runs, diff, p, n, test = table.rows[0]
    assert (model, task, metric, runs) == ("M", "t", "f1", "new − ref")
    # mean over en and fr (de only in one run) of the per-language differences: (0.25 + 0.5) / 2
    assert diff.startswith("+0.375 [") and n == 8 and "paired bootstrap" in test
    # two seeds in common: a paired test over seeds and items
    a = _run_with_items(tmp_path, "a2", {"en": [1, 0, 0, 1]}, ids, seeds=(0, 1))
    b = _run_with_items(tmp_path, "b2", {"en": [1, 1, 0, 1]}, ids, seeds=(0, 1))
    paired = differences_table([a, b], ["a2", "b2"]).table
    assert paired is not None
    (row,) = paired.rows
    # n counts the items; the test combines the 2 seeds' spread and the items'
    assert row[6].startswith("+0.25 [") and row[8] == 4 and "2 training seeds" in row[9]
    rep = compare_runs([ref, new])
    assert (
        rep.sections[-1].kind == "table" and rep.sections[-1].payload.name == "paired_differences"
    )


def test_a_resampling_p_value_of_zero_reads_as_below_one_resample() -> None:
    from polymnesia.metrics.uncertainty import PairedTest
    from polymnesia.reports.run_differences import _p

    assert _p(PairedTest(0.3, 0.1, 0.5, 0.0, 10, "paired bootstrap", n_resamples=1000)) == "< 0.001"
    assert (
        _p(PairedTest(0.3, -0.1, 0.5, 0.1234, 10, "paired bootstrap", n_resamples=1000)) == "0.123"
    )


def test_an_untestable_pair_names_the_runs_in_plain_text(tmp_path: Path) -> None:
    from dataclasses import replace

    from polymnesia.items import read_items, write_items
    from polymnesia.reports.run_differences import differences_table

    ids = ["a", "b", "c", "d"]
    ref = _run_with_items(tmp_path, "ref", {"en": [1, 0, 0, 1]}, ids)
    new = _run_with_items(tmp_path, "new", {"en": [1, 1, 0, 1]}, ids)
    # a second stage with the same arm's items (F_p measured after each of two tasks)
    merged = new / "results" / "items.jsonl"
    sets = read_items(merged)
    write_items(merged, [*sets, *(replace(s, stage="ft2") for s in sets)])
    found = differences_table([ref, new], ["ref", "new"])
    assert len(found.untested) == 1
    reason = found.untested[0]
    assert "\x00" not in reason
    assert reason == (
        "M/t/f1: the later run scored this arm more than once in en (several stages gave it "
        "items), so which items to pair is ambiguous"
    )


def test_scores_without_intervals_are_counted_as_untestable_not_lost(tmp_path: Path) -> None:
    from polymnesia.reports.compare import compare_runs
    from polymnesia.reports.run_differences import differences_table
    from polymnesia.results import write_scores

    runs = []
    for name, value in (("ref", 0.5), ("new", 0.6)):
        run = tmp_path / name
        (run / "results").mkdir(parents=True)
        (run / "run.json").write_text(json.dumps({"experiment": "two_phase", "name": name}))
        # lm-eval's accuracy: a value and lm-eval's stderr, no interval and no items
        write_scores(run / "results" / "scores.jsonl", [Score("P1", "en", "acc", value, task="ea")])
        write_table(
            run / "results",
            group_table(
                [Score("P1", "en", "acc", value, task="ea")],
                "acc",
                {"all": ["en"]},
                name="t",
                title="t",
            ),
        )
        runs.append(run)
    found = differences_table(runs, ["ref", "new"])
    assert (found.table, found.without_evidence, found.with_evidence) == (None, 1, 0)
    text = compare_runs(runs).to_markdown()
    assert "1 score both runs hold carries no per-item evidence and is not tested" in text
    assert (
        "No score could be paired" not in text
    )  # nothing with evidence to pair in the first place


def test_a_comparison_opens_with_how_the_configs_differ(tmp_path: Path) -> None:
    """Two hash-named runs: the report says which keys differ (issue 42), not just that they do."""
    a, b = make_run(tmp_path, "run-1a2b", 0.0), make_run(tmp_path, "run-3c4d", 0.1)
    (a / "config.yaml").write_text(
        "name: x\nexperiment: lf_mlf\nfinetune:\n  steps: 300\n  lr: 0.001\nseeds: [0, 1]\n"
    )
    (b / "config.yaml").write_text(
        "name: y\nexperiment: lf_mlf\nfinetune:\n  steps: 600\n  lr: 0.001\nslf: false\n"
        "seeds: [0, 1]\n"
    )
    md = compare_runs([a, b]).to_markdown()
    assert "## How the configs differ" in md
    assert "- `finetune.steps`: 300 (run-1a2b) / 600 (run-3c4d)" in md
    assert "- `slf`: (unset) (run-1a2b) / False (run-3c4d)" in md
    assert "finetune.lr" not in md and "`name`" not in md
    assert md.index("How the configs differ") < md.index("Table 1: zero-shot")
    (b / "config.yaml").write_text((a / "config.yaml").read_text().replace("name: x", "name: z"))
    assert "the same but for their names" in compare_runs([a, b]).to_markdown()
