"""Khelli et al. 2025's protocol end to end through the CLI on the smoke config (3 Bible
languages)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rebuild import assert_report_rebuilds

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.results import read_scores

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
ONE_ORDER = ["methods=[vanilla]", "orders=[{name: res, kind: resource}]"]


def test_smoke_run_reports_every_method_order_and_metric(
    isolated_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, "--run-dir", str(run)]) == 0
    assert mismatches(run, "lifelong_smoke") == []  # the scores recorded before the restructuring
    scores = read_scores(run / "results" / "scores.jsonl")
    orders = {s.setting for s in scores if s.metric == "order_position"}
    assert orders == {"resource", "shuffle1", "destructive"}
    labels = {"MULTI", "MULTI r=4", "MONO", "VANILLA", "SHARED LoRA r=4", "NON-SHARED LoRA r=4"}
    assert labels <= {s.model for s in scores}
    for stem in ("VANILLA", "SHARED_LoRA_r4", "NONSHARED_LoRA_r4", "MULTI", "MONO"):
        for order in orders:
            R = np.load(run / "results" / "R" / f"R_{stem}_{order}.npy")
            assert R.shape == (3, 3) and np.all((R >= 0) & (R <= 1))
    # the sequential R is the per-step matrix the stages wrote
    mat = json.loads((run / "stages" / "vanilla_resource_2" / "matrix.json").read_text())
    csv = (run / "results" / "R" / "R_VANILLA_resource.csv").read_text().splitlines()
    assert csv[0] == "step,trained," + ",".join(mat["order"])
    report = (run / "report.md").read_text()
    for needle in (
        "Table 1",
        "Table 2",
        "| VANILLA |",
        "| r = 4 |",
        "CFT",
        "Donors",
        "Figure 5",
        "Figure 7",
        "claims were testable at this scale",  # the claims block
        "VANILLA forgets: CBT < 0",
        "Did the task models learn?",
        "forgetting (mammoth)",
        "procedure 'move_to_end'",
        " ± ",  # intervals from the per-item evidence
    ):
        assert needle in report
    assert (run / "results" / "table1_methods.csv").exists()
    assert len(list((run / "figures").glob("fig7_R_*.png"))) == 6  # VANILLA + SHARED r=4, 3 orders
    assert_report_rebuilds(run, isolated_cache, tmp_path / "copy")


def test_interrupted_run_resumes_at_language_k_keeping_rows(
    isolated_cache: Path, tmp_path: Path, capsys
) -> None:
    run = tmp_path / "run"
    faults = Path(__file__).resolve().parents[1] / "faults.py"
    args = ["run", CONFIG, *ONE_ORDER, "--run-dir", str(run)]
    cmd = [sys.executable, str(faults), "kill-at-language=2", "--", *args]
    proc = subprocess.run(cmd, env=dict(os.environ), capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    first = json.loads((run / "stages" / "vanilla_res_1" / "matrix.json").read_text())
    assert len(first["rows"]) == 2 and not (run / "stages" / "vanilla_res_2").exists()
    assert main(["run", CONFIG, *ONE_ORDER, "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "reuse  vanilla_res_0" in out and "reuse  vanilla_res_1" in out
    assert "run    vanilla_res_2" in out
    final = json.loads((run / "stages" / "vanilla_res_2" / "matrix.json").read_text())
    assert final["rows"][:2] == first["rows"] and len(final["rows"]) == 3


def test_paper_config_validates_offline_and_stops_in_one_line(
    isolated_cache: Path, tmp_path: Path
) -> None:
    paper = CONFIG.replace("lifelong_smoke.yaml", "lifelong_paper.yaml")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    cli = [sys.executable, "-m", "polymnesia"]
    ok = subprocess.run(
        [*cli, "validate", paper], env=env, capture_output=True, text=True, timeout=300
    )
    assert ok.returncode == 0 and "lifelong" in ok.stdout
    args = [*cli, "run", paper, "--run-dir", str(tmp_path / "run")]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("polymnesia: error:")]
    assert proc.returncode == 2 and len(errors) == 1
    # the Hub model is named before any stage runs (the dataset would be the next refusal)
    assert "FacebookAI/xlm-roberta-base" in errors[0] and "HF_HUB_OFFLINE" in errors[0]
    assert not (tmp_path / "run" / "stages").exists()


def test_token_classification_path_on_constructed_tagging(
    isolated_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    token = ["task.kind=token", "task.metric=accuracy", "task.num_labels=null", "task_pivot=de"]
    token.append("task.context=bidirectional")  # each step reloads the last one's classifier
    assert (
        main(
            [
                "run",
                CONFIG,
                *token,
                "methods=[vanilla,nonshared_lora]",
                *ONE_ORDER[1:],
                "--run-dir",
                str(run),
            ]
        )
        == 0
    )
    scores = [s for s in read_scores(run / "results" / "scores.jsonl") if s.metric == "accuracy"]
    assert {s.model for s in scores} >= {"VANILLA", "NON-SHARED LoRA r=4", "untrained"}
    assert all(0.0 <= s.value <= 1.0 for s in scores)
    assert "Table 1" in (run / "report.md").read_text()
    stages = json.loads((run / "run.json").read_text())["stages"]
    saved = [
        Path(info["entry"]) / "model" / "config.json"
        for info in stages.values()
        if (Path(info["entry"]) / "model" / "config.json").is_file() and info["kind"] != "pretrain"
    ]
    assert saved and all(json.loads(c.read_text())["is_causal"] is False for c in saved)
