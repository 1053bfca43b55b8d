"""Forgetting baselines as two_phase arms end to end: trained, merged, scored, judged vs CFT."""

from __future__ import annotations

from pathlib import Path

import pytest
from safetensors.torch import load_file

from polymnesia.cli.main import main
from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml")
ARMS = [
    "pairs=[{phase1: english, phase2: dissimilar}]",
    "mitigation.pair=0",
    "mitigation.replay=[]",
    "mitigation.freezing=[]",
    "mitigation.lora_rank=null",
    "mitigation.baselines=[{name: L2SP, method: l2sp, options: {alpha: 1.0}},"
    " {name: LwF, method: distill}, {name: MERGE, method: merge}]",
]


def _weights(stage: Path) -> dict:
    out: dict = {}
    for f in sorted((stage / "model").glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def test_baseline_arms_train_merge_and_are_judged_against_cft(
    isolated_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, *ARMS, "--run-dir", str(run)]) == 0
    stages = run / "stages"
    scores = read_jsonl(run / "results" / "scores.jsonl")
    evaluated = {s["model"] for s in scores if s["task"].startswith("poly_")}
    assert {"L2SP", "LwF", "MERGE"} <= evaluated
    # MERGE is the mean of the Phase 1 and plain CFT weights, tensor by tensor
    p1, cft = _weights(stages / "p1_english"), _weights(stages / "cft_english__dissimilar")
    merged = _weights(stages / "mit_MERGE")
    for name, w in merged.items():
        want = ((p1[name].float() + cft[name].float()) / 2).to(w.dtype)
        assert (w - want).abs().max() <= 1e-6, name
    # L2-SP and LwF trained Phase 2 (their own loss curves) and ended elsewhere than CFT
    for arm in ("L2SP", "LwF"):
        assert (stages / f"mit_{arm}" / "metrics.jsonl").is_file()
        w = _weights(stages / f"mit_{arm}")
        assert any(not (w[n] == cft[n]).all() for n in w), arm
    report = (run / "report.md").read_text()
    for arm in ("L2SP", "LwF", "MERGE"):
        assert f"{arm} keeps English ability better than plain CFT" in report
    claims = (run / "results" / "claims.csv").read_text()
    assert "EA(MERGE) - EA(CFT)" in claims
