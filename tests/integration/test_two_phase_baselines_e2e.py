"""Forgetting baselines as two_phase arms end to end: trained, merged, scored, judged vs CFT."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from safetensors.torch import load_file

from polymnesia.cli.main import main
from polymnesia.experiments.two_phase.figures import MIN_LAYERS, layer_curves
from polymnesia.io import read_jsonl
from polymnesia.results import score_from_dict

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
    # Figures 1-2: every baseline's Phase 2 model drifts from the Phase 1 model like CFT's
    drift = [s for s in scores if s["metric"] == "layer_covariance_drift"]
    curves = layer_curves([score_from_dict(s) for s in drift])  # Figure 2's lines
    cft = curves["P2 (english -> dissimilar) vs P1 english"]
    layers = cft[0]
    assert len(layers) >= MIN_LAYERS
    for arm in ("L2SP", "LwF", "MERGE"):
        xs, ys = curves[f"{arm} vs P1 english"]
        assert xs == layers and all(math.isfinite(y) and y >= 0 for y in ys), arm
        assert ys != cft[1], arm  # its own model's drift, not CFT's
    tsne = json.loads((stages / "drift_english__dissimilar" / "tsne.json").read_text())
    assert {"L2SP", "LwF", "MERGE"} <= set(tsne)  # Figure 1's points
    assert all(len(tsne[arm]) == len(layers) for arm in ("L2SP", "LwF", "MERGE"))
    assert (run / "figures" / "fig2_layer_drift.png").is_file()
    assert "Figure 2: per-layer covariance change" in report
