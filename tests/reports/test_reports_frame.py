"""load_run / load_runs: a run folder's records as one indexed table and as a DataFrame."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polymnesia.errors import DataError
from polymnesia.experiments.seed_records import seeded_run
from polymnesia.items import ItemSet, write_items
from polymnesia.pipeline.run_dir import merge_stage_outputs
from polymnesia.reports import RunTable, load_run, load_runs
from polymnesia.results import Score, write_scores


def _run(folder: Path, experiment: str, scores: list[Score]) -> Path:
    (folder / "results").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"experiment": experiment, "name": "cfg"}))
    write_scores(folder / "results" / "scores.jsonl", scores)
    return folder


def test_two_runs_become_one_frame_with_intervals_and_extras(tmp_path: Path) -> None:
    a = _run(
        tmp_path / "a",
        "lifelong",
        [
            Score(
                "MULTI", "fr", "macro_f1", 0.5, task="genre", seed=0, ci_low=0.4, ci_high=0.6, n=80
            ),
            Score("MULTI", "de", "macro_f1", 0.3, task="genre", seed=0, extra={"order": 2}),
        ],
    )
    b = _run(tmp_path / "b", "lifelong", [Score("VANILLA", "fr", "macro_f1", 0.25, seed=1)])
    df = load_runs(a, b)
    assert list(df.columns[:7]) == ["run", "experiment", "name", "model", "lang", "metric", "value"]
    assert len(df) == 3 and set(df.run) == {"a", "b"} and set(df.experiment) == {"lifelong"}
    first = df[(df.run == "a") & (df.lang == "fr")].iloc[0]
    assert (first.value, first.ci_low, first.ci_high, first.n) == (0.5, 0.4, 0.6, 80)
    assert df[df.lang == "de"]["extra.order"].iloc[0] == 2
    assert df.groupby("run").value.mean().round(3).to_dict() == {"a": 0.4, "b": 0.25}
    assert len(load_runs(a, b, metrics=["bits_per_byte"])) == 0


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a polymnesia run folder"):
        load_runs(tmp_path)
    a = _run(tmp_path / "x" / "run", "two_phase", [Score("m", "en", "acc", 1.0)])
    b = _run(tmp_path / "y" / "run", "two_phase", [Score("m", "en", "acc", 1.0)])
    with pytest.raises(DataError, match="same name"):
        load_runs(a, b)
    (a / "results" / "scores.jsonl").write_text('{"broken\n{"model": "m"}\n')
    with pytest.raises(DataError):
        load_runs(a)


def test_a_run_table_answers_selections_from_its_index(tmp_path: Path) -> None:
    # two stages' cache entries merged into a run folder, as the runner does
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"experiment": "lf_mlf", "name": "cfg"}))
    entries = {}
    for stage, model, v in (("eval_a", "A", 0.5), ("eval_b", "B", 0.7)):
        entry = entries[stage] = tmp_path / "cache" / stage
        entry.mkdir(parents=True)
        scores = [Score(model, lang, "f1", v + i / 10, task="t") for i, lang in enumerate("xy")]
        scores.append(Score(model, "x", "bits_per_byte", 2.0))
        write_scores(entry / "scores.jsonl", scores)
        sets = [ItemSet(model, "x", "values", [0, 1], {"values": [v, v]}, task="t")]
        write_items(entry / "items.jsonl", sets)
    merge_stage_outputs(run, entries)
    table = load_run(run)
    assert isinstance(table, RunTable) and table.experiment == "lf_mlf" and table.name == "run"
    assert [(s.model, s.lang) for s in table.scores(metric="f1", model="B")] == [
        ("B", "x"),
        ("B", "y"),
    ]
    assert len(table.scores(metric=["f1", "bits_per_byte"])) == 6
    assert [s.value for s in table.scores(metric="f1", lang="y")] == pytest.approx([0.6, 0.8])
    assert (
        table.scores(metric="f1", model="C") == [] and table.scores(stage="eval_a")[0].model == "A"
    )
    assert [s.model for s in table.items(stage="eval_b")] == ["B"]
    assert [s.stage for s in table.items(model="A")] == ["eval_a"]
    assert set(table.stages()) == {"eval_a", "eval_b"}
    df = table.frame(metrics=["f1"])
    assert len(df) == 4 and set(df.stage) == {"eval_a", "eval_b"}
    assert load_runs(run).equals(table.frame())


def test_a_seeded_run_table_tags_and_indexes_each_seed(tmp_path: Path) -> None:
    # a two-seed run: "base" is shared by both seeds, "eval.seed1" is seed 1's own copy of "eval"
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    stages = ["base", "eval", "eval.seed1"]
    (run / "run.json").write_text(
        json.dumps({"experiment": "language_modeling", "stages": {n: {} for n in stages}})
    )
    s = lambda m, v, st: Score(m, "fr", "acc", v, task="t", stage=st)  # noqa: E731
    scores = [s("chance", 0.5, "base"), s("A", 0.8, "eval"), s("A", 0.7, "eval.seed1")]
    write_scores(run / "results" / "scores.jsonl", scores)
    sets = [
        ItemSet("A", "fr", "values", [0, 1], {"values": [1.0, v]}, task="t", stage=st)
        for v, st in ((1.0, "eval"), (0.0, "eval.seed1"))
    ]
    write_items(run / "results" / "items.jsonl", sets)
    table = load_run(run)
    assert seeded_run(table, [0]) is table  # one seed: the records as they are
    two = seeded_run(table, [0, 1])
    assert sorted((r.value, r.seed) for r in two.scores(model="chance")) == [(0.5, 0), (0.5, 1)]
    assert [(r.value, r.seed) for r in two.scores(metric="acc", model="A", seed=1)] == [(0.7, 1)]
    assert sorted(i.seed for i in two.items(model="A")) == [0, 1]  # type: ignore[type-var]
    assert len(table.scores()) == 3 and [i.seed for i in table.items()] == [None, None]
    assert two.run_dir == table.run_dir and two.experiment == "language_modeling"
