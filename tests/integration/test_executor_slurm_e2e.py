"""``polymnesia run --executor slurm`` on a one-node SLURM cluster (the ``slurm_cluster``
fixture): lifelong's smoke config, shrunk as the local executor's test shrinks it, gives the
inline run's scores, items and report, each from an empty stage cache; run again, it submits
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_executor_local_e2e import CONFIG, SMALL, TIMED, _rows, _sections

pytestmark = pytest.mark.integration


def _run(tmp_path: Path, name: str, *extra: str) -> tuple[Path, str]:
    from polymnesia.paths import cache_dir

    run, cache = tmp_path / name, tmp_path / f"cache-{name}"
    bible = cache_dir() / "data" / "bible"
    if bible.exists():  # the download is shared, not timed
        (cache / "data").mkdir(parents=True, exist_ok=True)
        if not (cache / "data" / "bible").exists():
            (cache / "data" / "bible").symlink_to(bible)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "polymnesia", "run", CONFIG, *SMALL, "--run-dir", str(run)]
    res = subprocess.run([*cmd, *extra], env=env, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return run, res.stdout


def test_slurm_executor_gives_the_inline_run(
    slurm_cluster: Any, tmp_path: Path, small_lifelong_inline: tuple[Path, Path]
) -> None:
    inline, _ = small_lifelong_inline
    slurm, out = _run(tmp_path, "slurm", "cluster.poll_s=0.5", "--executor", "slurm")
    assert "[polymnesia] submit ewc_resource_0 > ewc_resource_1 > ewc_resource_2 (job " in out
    for f in ("results/scores.jsonl", "results/items.jsonl"):
        assert _rows(slurm / f) == _rows(inline / f), f
    want, got = _sections(inline / "report.md"), _sections(slurm / "report.md")
    assert list(got) == list(want) and "## The paper's claims at this scale" in want
    for heading in want:
        if heading not in TIMED:  # wall times and throughputs differ between any two runs
            assert got[heading] == want[heading], heading
    stages = json.loads((slurm / "run.json").read_text())["stages"]
    assert {s.get("executor") for s in stages.values()} == {"slurm"}
    for s in stages.values():
        log = Path(s["log"])
        assert log.is_file() and log.name == f"{s['job']}_0_log.out", s
        assert log.is_relative_to(slurm / "logs" / "slurm") and s["attempts"] == 1
    board = json.loads((slurm / "logs" / "executor.json").read_text())["stages"]
    assert {b["state"] for b in board.values()} == {"done"}
    # the same command again submits nothing
    _, again = _run(tmp_path, "slurm", "cluster.poll_s=0.5", "--executor", "slurm")
    assert "[polymnesia] submit " not in again and "0 built" in again
