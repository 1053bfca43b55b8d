"""``polymnesia run --executor slurm`` killed (SIGKILL) while a job runs, then started again:
the new driver waits on the job the first one submitted instead of submitting it again, no
stage is submitted twice, and the run ends as the inline run does (scores, items, report)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_executor_local_e2e import CONFIG, SMALL, TIMED, _rows, _sections

pytestmark = pytest.mark.integration


def _board(run: Path) -> dict[str, dict[str, Any]]:
    try:
        return json.loads((run / "logs" / "executor.json").read_text())["stages"]
    except (OSError, ValueError, KeyError):
        return {}


def test_a_restarted_driver_reattaches_and_submits_nothing_twice(
    slurm_cluster: Any, tmp_path: Path, small_lifelong_inline: tuple[Path, Path]
) -> None:
    inline, inline_cache = small_lifelong_inline
    run, cache = tmp_path / "slurm", tmp_path / "cache-slurm"
    (cache / "data").mkdir(parents=True)
    if (inline_cache / "data" / "bible").exists():  # the download is shared
        (cache / "data" / "bible").symlink_to((inline_cache / "data" / "bible").resolve())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "polymnesia", "run", CONFIG, *SMALL, "--run-dir", str(run)]
    cmd += ["cluster.poll_s=0.5", "--executor", "slurm"]
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # the first job (data: many stages need it) runs
        if _board(run).get("data", {}).get("state") == "running":
            break
        time.sleep(0.2)
    job = str(_board(run)["data"]["where"]).removeprefix("job ")
    os.kill(first.pid, signal.SIGKILL)  # no handler runs: its job is not cancelled
    first.communicate(timeout=60)
    # hold the job (SUSPENDED is a running state) so it cannot end before the new driver looks
    subprocess.run(["scontrol", "suspend", job], check=True, capture_output=True)
    second = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: list[str] = []

    def read() -> None:
        assert second.stdout is not None
        for line in second.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while time.monotonic() < deadline and not any(" attach " in x for x in lines):
        if second.poll() is not None:
            break
        time.sleep(0.2)
    subprocess.run(["scontrol", "resume", job], check=True, capture_output=True)
    second.wait(timeout=1200)
    reader.join(timeout=60)
    out = "".join(lines)
    assert second.returncode == 0, out[-3000:]
    (attached,) = [x for x in out.splitlines() if x.startswith("[polymnesia] attach ")]
    assert attached.startswith(f"[polymnesia] attach data (job {job}, submitted by an earlier")
    assert "[polymnesia] submit data" not in out
    # one submission in each job's folder: none twice; each stage built in one attempt
    folders = [d for d in (run / "logs" / "slurm").iterdir() if d.is_dir()]
    assert all(len(list(d.glob("*_submitted.pkl"))) == 1 for d in folders), folders
    stages = json.loads((run / "run.json").read_text())["stages"]
    assert stages["data"]["job"] == job  # built by the job the first driver submitted
    assert all(s.get("attempts", 1) == 1 for s in stages.values()), stages
    for f in ("results/scores.jsonl", "results/items.jsonl"):
        assert _rows(run / f) == _rows(inline / f), f
    want, got = _sections(inline / "report.md"), _sections(run / "report.md")
    assert list(got) == list(want)
    for heading in want:
        if heading not in TIMED:
            assert got[heading] == want[heading], heading
