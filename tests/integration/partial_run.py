"""A protocol's partial report: one arm's stage fails for good under ``--executor local``.

Called at the end of a protocol's end-to-end test, on the run it made (before its cache is
deleted): the cache entry of one stage of one arm is removed, and the same command is run
again into another run folder with that stage made to fail (tests/faults.py), so every other
stage is reused and only the lost one is tried. The run must exit 1 in one line naming the
stage and its log, its report must open with the banner naming the missing arm, its records
must be the whole run's without those of the stages it lost, and ``polymnesia report`` must
rebuild the same report (:mod:`polymnesia.pipeline.partial`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FAULTS = str(Path(__file__).resolve().parents[1] / "faults.py")


def _untimed(row: dict) -> dict:  # type: ignore[type-arg]
    if isinstance(row.get("extra"), dict):
        row = {**row, "extra": {k: v for k, v in row["extra"].items() if "seconds" not in k}}
    return {k: v for k, v in row.items() if "seconds" not in k}


def _rows(path: Path, drop: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    rows = (_untimed(json.loads(x)) for x in path.read_text().splitlines())
    return sorted(json.dumps(r, sort_keys=True) for r in rows if r.get("stage") not in drop)


def assert_partial_report(
    config: str, overrides: list[str], whole: Path, fails: str, arm: str, part: Path
) -> dict:  # type: ignore[type-arg]
    """Fail ``fails`` (a stage of ``arm``) in a rerun of ``whole``'s command into ``part``;
    check the partial run against the whole one. Returns the partial run's ``missing``
    record."""
    shutil.rmtree((whole / "stages" / fails).resolve())  # so the stage is built, and fails
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, FAULTS, f"fail-stage={fails}", "--", "run", config, *overrides]
    cmd += ["--run-dir", str(part), "--executor", "local", "--jobs", "1"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out[-3000:]
    log = part / "logs" / f"{fails}.log"
    (error,) = [x for x in out.splitlines() if x.startswith("[polymnesia] error: ")]
    assert f"1 stage(s) failed: {fails} (log {log})" in error, error
    assert f"(missing arms: {arm})" in error, error
    record = json.loads((part / "run.json").read_text())["missing"]
    assert record["arms"] == [arm]
    assert record["stages"][fails]["state"] == "failed"
    md = (part / "report.md").read_text()
    assert f"> **Arm {arm} is missing: stage {fails} failed (log: {log})" in md
    assert f"Arm {arm} is missing" in (part / "report.html").read_text()
    lost = set(record["stages"])
    for name in ("scores.jsonl", "items.jsonl"):
        if (whole / "results" / name).exists():
            got, want = part / "results" / name, whole / "results" / name
            assert _rows(got) == _rows(want, lost), name
    assert _rows(part / "results" / "scores.jsonl") != _rows(whole / "results" / "scores.jsonl")
    rebuilt = subprocess.run(
        [sys.executable, "-m", "polymnesia", "report", str(part)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert (part / "report.md").read_text() == md
    return record  # type: ignore[no-any-return]
