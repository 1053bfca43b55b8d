"""Two CPU processes (gloo) reproduce the single-process run for the same global batch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from smoke import SMOKE

from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


def run(tmp_path: Path, name: str, launcher: list[str]) -> Path:
    cache = tmp_path / f"cache-{name}"
    (cache / "data").mkdir(parents=True)
    env = {**os.environ, "POLYMNESIA_CACHE": str(cache), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [
            *launcher,
            "-m",
            "polymnesia.cli.main",
            "run",
            CONFIG,
            *SMOKE,
            "train.steps=8",
            "--run-dir",
            str(tmp_path / name),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return tmp_path / name


def test_two_processes_match_one(tmp_path: Path):
    one = run(tmp_path, "one", [sys.executable])
    two = run(
        tmp_path, "two", [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    )
    loss1 = [r["loss"] for r in read_jsonl(one / "metrics.jsonl")]
    loss2 = [r["loss"] for r in read_jsonl(two / "metrics.jsonl")]
    assert len(loss1) == len(loss2) == 8
    # DDP all-reduces gradients in another order: float32 rounding (1e-7 relative) over 8
    # AdamW steps with no amplifying method moves a loss near 4 by about 1e-6 (the FSDP2
    # equality tests measure it); 1e-4 leaves a factor 100 for another CPU's kernels
    assert loss2 == pytest.approx(loss1, abs=1e-4)
    s1 = {
        (s["lang"], s["metric"]): s["value"] for s in read_jsonl(one / "results" / "scores.jsonl")
    }
    s2 = {
        (s["lang"], s["metric"]): s["value"] for s in read_jsonl(two / "results" / "scores.jsonl")
    }
    # scores of weights that differ by rounding, evaluated with sums split over processes
    assert s1.keys() == s2.keys() and s2 == pytest.approx(s1, rel=1e-4)
