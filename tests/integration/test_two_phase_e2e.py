"""The two-phase CFT paper's protocol end to end through the CLI on configs/two_phase_smoke.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from partial_run import assert_partial_report
from rebuild import assert_report_rebuilds

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml")


def test_two_phase_smoke_report(isolated_cache: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, "--run-dir", str(run)]) == 0
    assert mismatches(run, "two_phase_smoke") == []
    scores = read_jsonl(run / "results" / "scores.jsonl")
    evaluated = {s["model"] for s in scores if s["task"].startswith("poly_")}
    arms = {"GR_10", "ER_10", "LF_H1", "LF_H2", "Spectrum", "LoRA"}
    assert {
        "base",
        "P1 english",
        "CFT english -> similar",
        "Mix english + similar",
    } | arms <= evaluated
    des = {s["model"]: s["value"] for s in scores if s["metric"] == "des"}
    assert set(des) == {"english -> similar", "english -> dissimilar"}
    assert (
        all(0 < v <= 1 for v in des.values())
        and des["english -> similar"] > des["english -> dissimilar"]
    )
    assert all(s["value"] >= 0 for s in scores if s["metric"] == "mpd")
    # Phase 2 never saw a Phase 1 verse
    p1 = {r["verse_id"] for r in read_jsonl(run / "stages" / "set_english" / "records.jsonl")}
    for name in ("similar", "dissimilar"):
        p2 = {r["verse_id"] for r in read_jsonl(run / "stages" / f"set_{name}" / "records.jsonl")}
        assert not p1 & p2, name
    for rel in (
        "results/table1_ea.csv",
        "results/table2_ma.csv",
        "results/table3_des.csv",
        "results/table4_mpd.csv",
        "results/table5_mitigation.csv",
        "results/claims.csv",
        "figures/fig2_layer_drift.png",
        "figures/ea_ma_tradeoff.png",
        "report.html",
    ):
        assert (run / rel).is_file(), rel
    text = (run / "report.md").read_text()
    assert "CFT beats the mixture" in text and "Table 5: mitigating strategies" in text
    # LoRA's training lost for good: the report of the other arms; drift needs every arm
    record = assert_partial_report(CONFIG, [], run, "mit_LoRA", "LoRA", tmp_path / "part")
    assert record["stages"]["drift_english__dissimilar"]["state"] == "left out"
    assert_report_rebuilds(run, isolated_cache, tmp_path / "copy")
