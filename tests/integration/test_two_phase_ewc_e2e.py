"""EWC as a two_phase arm end to end: the Phase 1 Fisher stage, Phase 2 pulled by it, judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
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
    "mitigation.baselines=[{name: EWC, method: ewc, options: {lam: 1.0e+6, fisher_examples: 6,"
    " fisher_batch_size: 2}}]",
]


def _weights(stage: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted((stage / "model").glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def test_ewc_arm_estimates_the_phase_1_fisher_trains_and_is_judged(
    isolated_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, *ARMS, "--run-dir", str(run)]) == 0
    stages = run / "stages"
    p1 = _weights(stages / "p1_english")
    fisher = load_file(str(stages / "fisher_EWC" / "fisher.safetensors"))
    summary = json.loads((stages / "fisher_EWC" / "fisher_summary.json").read_text())
    assert summary["examples"] == 6 and summary["batch_size"] == 2
    # one non-negative entry per trainable weight of the Phase 1 model, not all zero
    assert set(fisher) <= set(p1) and len(fisher) >= len(p1) - 1  # a tied head is one tensor
    for name, f in fisher.items():
        assert f.shape == p1[name].shape and bool((f >= 0).all()), name
    assert sum(float(f.sum()) for f in fisher.values()) > 0
    # Phase 2 trained (its loss curve), and the Fisher-weighted pull kept it nearer Phase 1
    assert (stages / "mit_EWC" / "metrics.jsonl").is_file()
    cft, ewc = _weights(stages / "cft_english__dissimilar"), _weights(stages / "mit_EWC")

    def moved(w: dict[str, torch.Tensor]) -> float:
        return sum(float(((w[n].float() - p1[n].float()) ** 2 * fisher[n]).sum()) for n in fisher)

    assert 0 < moved(ewc) < moved(cft)
    scores = read_jsonl(run / "results" / "scores.jsonl")
    assert "EWC" in {s["model"] for s in scores if s["task"].startswith("poly_")}
    assert "EWC keeps English ability better than plain CFT" in (run / "report.md").read_text()
    assert "EA(EWC) - EA(CFT)" in (run / "results" / "claims.csv").read_text()
    # Figure 2 draws the EWC model's per-layer drift from the Phase 1 model, as it draws CFT's
    drift = [score_from_dict(s) for s in scores if s["metric"] == "layer_covariance_drift"]
    curves = layer_curves(drift)
    xs, ys = curves["EWC vs P1 english"]
    assert xs == curves["P2 (english -> dissimilar) vs P1 english"][0] and len(xs) >= MIN_LAYERS
    assert all(y >= 0 for y in ys)
