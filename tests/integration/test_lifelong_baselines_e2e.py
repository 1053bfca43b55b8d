"""The forgetting baselines (L2-SP, EWC, LwF, MERGE, MERGE-TA, MERGE-TIES) as lifelong arms,
end to end through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from golden import GOLDEN, compare, score_table
from polymnesia.cli.main import main
from polymnesia.continual.examples import num_labels
from polymnesia.experiments import load_config
from polymnesia.experiments.lifelong.protocol import Lifelong
from polymnesia.pipeline.stage import StageContext
from polymnesia.results import read_scores
from polymnesia.stages.common import DATA
from polymnesia.stages.sequential import _build_model

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
ARMS = [
    "methods=[vanilla,l2sp,ewc,lwf,merge,merge_ta,merge_ties]",
    "orders=[{name: resource, kind: resource}]",
]
LABELS = ("EWC", "LwF", "L2-SP", "MERGE", "MERGE-TA", "MERGE-TIES")


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
    assert {"VANILLA", *LABELS} <= labels
    stages = run / "stages"
    for arm in ("l2sp", "ewc", "lwf", "merge", "merge_ta", "merge_ties"):
        mat = json.loads((stages / f"{arm}_resource_2" / "matrix.json").read_text())
        assert len(mat["rows"]) == 3
    # EWC's running Fisher is written by every step and read by the next
    assert all((stages / f"ewc_resource_{k}" / "fisher.safetensors").is_file() for k in range(3))
    # a first step has no previous model: EWC and LwF train it exactly as VANILLA does
    for label in ("EWC", "LwF", "MERGE", "MERGE-TA", "MERGE-TIES"):
        assert _step_scores(run, label, 0) == _step_scores(run, "VANILLA", 0)
    # MERGE averages each later step's trained weights with the previous step's; MERGE-TA and
    # MERGE-TIES merge them against the base; each with its plugin's default options
    for arm, merged in (
        ("merge", {"rule": "average", "weight": 0.5}),
        ("merge_ta", {"rule": "task_arithmetic", "lam": 0.4}),
        ("merge_ties", {"rule": "ties", "lam": 1.0, "density": 0.2}),
    ):
        for k in (1, 2):
            got = json.loads((stages / f"{arm}_resource_{k}" / "step_summary.json").read_text())
            assert got["merged_with_previous"] == merged
    for arm in ("merge", "merge_ta", "merge_ties"):
        first = json.loads((stages / f"{arm}_resource_0" / "step_summary.json").read_text())
        assert "merged_with_previous" not in first
    report = (run / "report.md").read_text()
    for label in LABELS:
        assert f"| {label} |" in report
        # judged against VANILLA on forgetting, in the claims block with the paper's claims
        assert f"{label} forgets less than VANILLA (higher CBT)" in report
    claims = (run / "results" / "claims.csv").read_text()
    assert "CBT(EWC) − CBT(VANILLA)" in claims
    assert "CBT(MERGE-TIES) − CBT(VANILLA)" in claims
    _check_merge_base(run, tmp_path)


def _check_merge_base(run: Path, tmp_path: Path) -> None:
    """The base of MERGE-TA / MERGE-TIES (rebuilt by each later step) is exactly the model
    the arm's first step started from: the pretrained body and the seeded fresh head."""
    specs = {s.name: s for s in Lifelong.build(load_config(CONFIG, ARMS))}

    def build(name: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor] | None]:
        spec = specs[name]
        ctx: StageContext = StageContext(
            spec, tmp_path / name, {r: run / "stages" / s for r, s in spec.inputs.items()}
        )
        p = spec.params
        n = num_labels(p.task, ctx.input(DATA), p.languages, p.slot_field)
        model, _, base = _build_model(ctx, p, n)
        return model, base

    start, none = build("merge_ties_resource_0")
    assert none is None  # a first step merges nothing
    _, base = build("merge_ties_resource_1")
    assert base is not None and set(base) == set(start.state_dict())
    assert all(torch.equal(v, base[k]) for k, v in start.state_dict().items())
    assert build("vanilla_resource_1")[1] is None  # other arms keep no base copy
