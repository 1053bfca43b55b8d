"""``polymnesia sweep`` end to end: the quickstart shrunk to seconds, two learning rates, through
``--executor local --jobs 2``. The data and tokenizer stages are built once for both points,
the two trainings run side by side, each point's run folder holds the scores a plain ``run``
of the same overrides gives (from a cache of its own), the sweep's folder holds the
comparison of both, and the same sweep again builds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from smoke import SMOKE

from polymnesia.cli.main import main

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")
LRS = "train.lr=[2.0e-3,1.0e-3]"


def _polymnesia(cache: Path, *argv: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    res = subprocess.run(
        [sys.executable, "-m", "polymnesia", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def _scores(run: Path) -> list[str]:
    rows = []
    for line in (run / "results" / "scores.jsonl").read_text().splitlines():
        row = json.loads(line)
        if isinstance(row.get("extra"), dict):  # wall times differ between any two runs
            row["extra"] = {k: v for k, v in row["extra"].items() if "seconds" not in k}
        rows.append(
            json.dumps({k: v for k, v in row.items() if "seconds" not in k}, sort_keys=True)
        )
    return sorted(rows)


def _fingerprints(run: Path) -> dict[str, str]:
    stages = json.loads((run / "run.json").read_text())["stages"]
    return {name: s["fingerprint"] for name, s in stages.items()}


def test_a_sweep_shares_its_stages_compares_its_runs_and_reruns_as_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out, cache = tmp_path / "sweep", tmp_path / "cache"
    argv = ["sweep", CONFIG, *SMOKE, LRS, "--out", str(out), "--executor", "local", "--jobs", "2"]
    text = _polymnesia(cache, *argv)
    lines = text.splitlines()
    # the stages the learning rate does not reach are built once, for both points
    assert sum(line.startswith("[polymnesia] start  data") for line in lines) == 1, text
    assert sum(line.startswith("[polymnesia] start  tokenizer") for line in lines) == 1, text
    starts = [
        i
        for i, line in enumerate(lines)
        if line.startswith(("[polymnesia] start  pretrain.p1", "[polymnesia] start  pretrain.p2"))
    ]
    first_done = next(
        i for i, line in enumerate(lines) if line.startswith("[polymnesia] done   pretrain")
    )
    assert len(starts) == 2 and max(starts) < first_done, text  # side by side
    assert "6 distinct stages, 6 built, 0 reused from the cache, 2 shared" in text, text
    fast, slow = out / "lr=0.002", out / "lr=0.001"
    md = (out / "compare.md").read_text(encoding="utf-8")
    assert md.startswith("# Comparison of 2 language_modeling runs")
    assert "- **lr=0.002**" in md and "- **lr=0.001**" in md
    assert "mu_overall [lr=0.002]" in md and "mu_overall [lr=0.001]" in md
    assert "`train.lr`: 0.002 (lr=0.002) / 0.001 (lr=0.001)" in md
    record = json.loads((out / "sweep.json").read_text())
    assert [p["run_dir"] for p in record["points"]] == [str(fast), str(slow)]
    # a point's run folder is the folder of a plain run of its overrides, built apart (in
    # this process, as is the second sweep below: no start-up of its own)
    plain = tmp_path / "plain"
    monkeypatch.setenv("POLYMNESIA_CACHE", str(tmp_path / "cache-plain"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert main(["run", CONFIG, *SMOKE, "train.lr=0.001", "--run-dir", str(plain)]) == 0
    assert _fingerprints(slow) == _fingerprints(plain)
    assert _scores(slow) == _scores(plain) and _scores(fast) != _scores(slow)
    table = "results/table1_bits_per_byte.csv"
    assert (slow / table).read_text() == (plain / table).read_text()
    stages = json.loads((slow / "run.json").read_text())["stages"]
    assert {s["executor"] for s in stages.values()} == {"local"}
    # the same sweep again starts nothing
    monkeypatch.setenv("POLYMNESIA_CACHE", str(cache))
    capsys.readouterr()
    assert main(argv) == 0
    again = capsys.readouterr().out
    assert "[polymnesia] start " not in again, again
    assert "6 distinct stages, 0 built, 6 reused from the cache" in again, again
    assert _scores(slow) == _scores(plain)


def test_a_failed_stage_stops_only_the_points_that_need_it(
    isolated_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The executor (stood in for: its own failures are tests/integration/
    test_executor_partial_e2e.py's) reports point 2's training failed: point 1's run folder
    and report are written (built here, inline), point 2's is not, and the command exits 1
    in one line naming the stage's log and the point."""
    from polymnesia.pipeline import executors

    log = tmp_path / "pretrain.p2.log"

    def run_local(planned: Any, *args: Any, **kwargs: Any) -> executors.LocalResult:
        assert [p.spec.name for p in planned][-2:] == ["pretrain.p2", "evaluate.p2"]
        return executors.LocalResult(failed={"pretrain.p2": log}, held_back=["evaluate.p2"])

    monkeypatch.setattr(executors, "run_local", run_local)
    out = tmp_path / "sweep"
    argv = ["sweep", CONFIG, *SMOKE, LRS, "--out", str(out), "--executor", "local"]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert (out / "lr=0.002" / "report.md").is_file() and not (out / "lr=0.001").exists()
    assert not (out / "compare.md").exists()  # one run: nothing to compare
    assert (
        f"[polymnesia] error: 1 stage(s) failed: pretrain.p2 (log {log}); points not finished: "
        "2 (lr=0.001); the stages that finished are cached"
    ) in text, text
