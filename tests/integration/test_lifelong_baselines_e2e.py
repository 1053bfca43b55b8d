"""The forgetting baselines (L2-SP, EWC, LwF, MERGE) as lifelong arms, end to end through the
CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golden import GOLDEN, compare, score_table
from polymnesia.cli.main import main
from polymnesia.results import read_scores

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
ARMS = ["methods=[vanilla,l2sp,ewc,lwf,merge]", "orders=[{name: resource, kind: resource}]"]


def _step_scores(run: Path, label: str, step: int) -> dict[str, float]:
    return {
        s.lang: s.value
        for s in read_scores(run / "results" / "scores.jsonl")
        if s.model == label and s.step == step and s.metric == "macro_f1"
    }


def test_baseline_arms_run_beside_vanilla_without_changing_it(
    isolated_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, *ARMS, "--run-dir", str(run)]) == 0
    # VANILLA's scores (and the untrained row) are the golden ones of the full smoke run
    want = json.loads((GOLDEN / "lifelong_smoke.json").read_text(encoding="utf-8"))
    got = {k: v for k, v in score_table(run).items() if k in want}
    vanilla = [k for k in got if json.loads(k)[0] == "VANILLA"]
    assert len(vanilla) >= 9 and compare(want, got, subset=True) == []
    labels = {s.model for s in read_scores(run / "results" / "scores.jsonl")}
    assert {"VANILLA", "L2-SP", "EWC", "LwF", "MERGE"} <= labels
    stages = run / "stages"
    for arm in ("l2sp", "ewc", "lwf", "merge"):
        mat = json.loads((stages / f"{arm}_resource_2" / "matrix.json").read_text())
        assert len(mat["rows"]) == 3
    # EWC's running Fisher is written by every step and read by the next
    assert all((stages / f"ewc_resource_{k}" / "fisher.safetensors").is_file() for k in range(3))
    # a first step has no previous model: EWC and LwF train it exactly as VANILLA does
    for label in ("EWC", "LwF", "MERGE"):
        assert _step_scores(run, label, 0) == _step_scores(run, "VANILLA", 0)
    # MERGE averages each later step's trained weights with the previous step's
    summary = json.loads((stages / "merge_resource_1" / "step_summary.json").read_text())
    assert summary["merged_with_previous"] == 0.5
    assert "merged_with_previous" not in json.loads(
        (stages / "merge_resource_0" / "step_summary.json").read_text()
    )
    report = (run / "report.md").read_text()
    for label in ("EWC", "LwF", "L2-SP", "MERGE"):
        assert f"| {label} |" in report
        # judged against VANILLA on forgetting, in the claims block with the paper's claims
        assert f"{label} forgets less than VANILLA (higher CBT)" in report
    claims = (run / "results" / "claims.csv").read_text()
    assert "CBT(EWC) − CBT(VANILLA)" in claims
