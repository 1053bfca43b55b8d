"""A training job cancelled with ``scancel`` mid-stage under ``--executor slurm`` is submitted
again and resumes from its last checkpoint to the numbers of an uninterrupted inline run:
the same training losses step by step and the same scores."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from smoke import SMOKE

from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")
FAULTS = str(Path(__file__).resolve().parents[1] / "faults.py")
#: 8 steps, checkpoints at 3 and 6: the job is cancelled once checkpoint 3 is written
ARGS = ["run", CONFIG, *SMOKE, "train.steps=8"]


def _final(run: Path) -> tuple[list[float], dict[str, float]]:
    losses = [r["loss"] for r in read_jsonl(run / "metrics.jsonl")]
    records = read_jsonl(run / "results" / "scores.jsonl")
    scores = {f"{s['lang']}/{s['metric']}": s["value"] for s in records}
    return losses, scores


def test_a_cancelled_training_job_resumes_to_the_same_numbers(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "held"
    cache = tmp_path / "cache"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    cmd = [sys.executable, FAULTS, f"hold-after-checkpoint=3:{marker}", "--", *ARGS]
    cmd += ["--run-dir", str(tmp_path / "slurm"), "cluster.poll_s=0.5", "cluster.attempts=2"]
    driver = subprocess.Popen(
        [*cmd, "--executor", "slurm"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []

    def read() -> None:
        assert driver.stdout is not None
        lines.extend(driver.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 600
    while not marker.exists() and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert marker.exists(), "".join(lines)[-3000:]
    jobs = subprocess.run(
        ["squeue", "--noheader", "--format=%i"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert len(jobs) == 1, jobs  # the job that holds pretrain, at its checkpoint at step 3
    subprocess.run(["scancel", jobs[0]], check=True)
    driver.wait(timeout=900)
    reader.join(timeout=60)
    out = "".join(lines)
    assert driver.returncode == 0, out[-3000:]
    assert "attempt 2 of 2" in out, out[-3000:]
    logs = "".join(p.read_text() for p in (tmp_path / "slurm" / "logs").rglob("*.out"))
    assert "resume pretrain" in logs, logs[-3000:]

    inline_cache = tmp_path / "cache-inline"
    inline = subprocess.run(
        [sys.executable, "-m", "polymnesia", *ARGS, "--run-dir", str(tmp_path / "inline")],
        env={**env, "POLYMNESIA_CACHE": str(inline_cache)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert inline.returncode == 0, inline.stderr[-3000:]
    (la, sa), (lb, sb) = _final(tmp_path / "slurm"), _final(tmp_path / "inline")
    assert len(la) == 8 and la == pytest.approx(lb, abs=1e-5)
    assert sa == pytest.approx(sb, rel=1e-5)
