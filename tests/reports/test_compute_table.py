"""Every report says where the compute went: seconds by stage role and kind, from the markers
of the run's cache entries (copied into the run's stage records by the runner), and
evaluation's share of training."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from polymnesia.experiments.reporting import compute_table, stage_times
from polymnesia.pipeline.integrity import write_marker
from polymnesia.pipeline.run_dir import merge_stage_outputs
from polymnesia.reports.render import Report


def _run(tmp: Path, stages: dict[str, tuple[str, str, float | None]]) -> Path:
    run, record, entries = tmp / "run", {}, {}
    for name, (kind, status, seconds) in stages.items():
        entry = tmp / "cache" / kind / name
        entry.mkdir(parents=True)
        (entry / "out.txt").write_text(name)
        if seconds is not None:
            write_marker(entry, {"fingerprint": name, "seconds": seconds})
        record[name] = {"kind": kind, "status": status, "entry": str(entry)}
        entries[name] = entry
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"stages": record}))
    merge_stage_outputs(run, entries)
    return run


def test_seconds_by_role_and_kind_and_the_evaluation_share(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        {
            "data": ("prepare_data", "reuse", 4.0),
            "pretrain": ("pretrain", "run", 60.0),
            "instruct_A": ("instruct", "run", 20.0),
            "lm_A": ("evaluate_lm", "run", 10.0),
            "zs_A": ("evaluate_zero_shot", "run", 10.0),
            "drift": ("representation_drift", "run", 6.0),
            "broken": ("evaluate_lm", "run", None),  # no marker: left out
        },
    )
    rows = {r["stage"]: r for r in stage_times(run)}
    assert rows["pretrain"]["role"] == "training" and rows["zs_A"]["role"] == "evaluation"
    assert rows["drift"]["role"] == "analysis" and rows["data"]["status"] == "reuse"
    assert rows["broken"]["seconds"] is None
    rep = Report("r")
    compute_table(rep, run)
    text = rep.write(run)[0].read_text()
    assert "## Compute by stage" in text
    assert "| training | pretrain | 1 | 1 | 60.0 | 54.5 |" in text  # 60 of 110 s
    assert "| evaluation | evaluate_lm | 1 | 1 | 10.0 | 9.1 |" in text
    assert "| data | prepare_data | 1 | 0 | 4.0 | 3.6 |" in text  # reused: built by another run
    assert "Evaluation stages took 20 s, 0.25x the training stages' 80 s." in text
    with (run / "results" / "stage_times.csv").open() as f:
        got = {r["stage"]: r for r in csv.DictReader(f)}
    assert set(got) == {"data", "pretrain", "instruct_A", "lm_A", "zs_A", "drift"}
    assert float(got["instruct_A"]["seconds"]) == 20.0


def test_no_run_record_no_section(tmp_path: Path) -> None:
    rep = Report("r")
    compute_table(rep, tmp_path)
    assert "Compute" not in rep.write(tmp_path)[0].read_text()


def test_every_built_in_stage_declares_its_role() -> None:
    from polymnesia.experiments.reporting import CATEGORIES
    from polymnesia.pipeline.stage import STAGES

    roles = {  # the package's stages (tests register stages of their own)
        kind: STAGES.get(kind).category
        for kind in STAGES.names()
        if STAGES.get(kind).__module__.startswith("polymnesia.stages")
    }
    assert len(roles) >= 20
    assert {k for k, r in roles.items() if r not in CATEGORIES[:-1]} == set()
    assert roles["pretraining_loss"] == roles["evaluate_lm"] == "evaluation"


def test_scoring_inside_a_sequential_step_counts_as_evaluation(tmp_path: Path) -> None:
    # lifelong: each sequential step trains, then scores its model on every language inside
    # the same stage; its step_summary.json says how long the scoring took (issue 29)
    stages = {
        "pretrain": ("pretrain", "run", 50.0),
        "vanilla_o1_0": ("sequential_step", "run", 30.0),
        "vanilla_o1_1": ("sequential_step", "run", 20.0),
    }
    run = _run(tmp_path, stages)
    for name, inner in (("vanilla_o1_0", 12.0), ("vanilla_o1_1", 8.0)):
        (tmp_path / "cache" / "sequential_step" / name / "step_summary.json").write_text(
            json.dumps({"trained": ["en"], "train_seconds": 1.0, "eval_seconds": inner})
        )
    merge_stage_outputs(run, {n: tmp_path / "cache" / k / n for n, (k, _, _) in stages.items()})
    rows = {r["stage"]: r for r in stage_times(run)}
    assert rows["vanilla_o1_0"]["eval_seconds"] == 12.0 and rows["pretrain"]["eval_seconds"] is None
    rep = Report("r")
    compute_table(rep, run)
    text = rep.write(run)[0].read_text()
    assert "| training | sequential_step | 2 | 2 | 30.0 | 30.0 |" in text  # 50 s less 20 s scoring
    assert "| evaluation | sequential_step (scoring inside) | 2 | 2 | 20.0 | 20.0 |" in text
    assert "took 20 s, 0.25x the training stages' 80 s" in text
    assert "Evaluation stages took 0 s" not in text


def test_the_run_folder_alone_gives_the_times(tmp_path: Path) -> None:
    # the cache entries removed after the run: the stage records in the run folder still
    # hold every build's seconds, so the table is the same
    run = _run(tmp_path, {"pretrain": ("pretrain", "run", 50.0), "lm": ("evaluate_lm", "run", 5.0)})
    before = stage_times(run)
    shutil.rmtree(tmp_path / "cache")
    assert stage_times(run) == before and before[0]["seconds"] == 50.0
