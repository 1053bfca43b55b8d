"""``polymnesia run --executor local --jobs 2`` on a protocol whose stage graph has
independent chains (lifelong: one chain of steps per method): the same run folder tables,
scores, items and report as the inline run, from an empty cache each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LIFELONG_SMOKE, SMALL_LIFELONG

pytestmark = pytest.mark.integration
CONFIG, SMALL = LIFELONG_SMOKE, SMALL_LIFELONG


def _run(tmp_path: Path, name: str, *extra: str) -> tuple[Path, str]:
    run = tmp_path / name
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "POLYMNESIA_CACHE": str(tmp_path / f"cache-{name}"),
    }
    cmd = [sys.executable, "-m", "polymnesia", "run", CONFIG, *SMALL, "--run-dir", str(run)]
    res = subprocess.run([*cmd, *extra], env=env, capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return run, res.stdout


def _untimed(row: dict) -> dict:  # type: ignore[type-arg]
    """A record without its wall times (``*seconds`` keys), which no two runs share."""
    if isinstance(row.get("extra"), dict):
        row = {**row, "extra": {k: v for k, v in row["extra"].items() if "seconds" not in k}}
    return {k: v for k, v in row.items() if "seconds" not in k}


#: the report's sections of wall-clock measurements
TIMED = ("## Cost", "## Compute by stage")


def _sections(report: Path) -> dict[str, str]:
    """``report.md`` by ``## `` heading (the title line under "")."""
    out: dict[str, str] = {}
    heading = ""
    for line in report.read_text().splitlines():
        if line.startswith("## "):
            heading = line
        out[heading] = out.get(heading, "") + line + "\n"
    return out


def _rows(path: Path) -> list[str]:
    rows = (_untimed(json.loads(x)) for x in path.read_text().splitlines())
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def test_local_executor_gives_the_inline_run(
    tmp_path: Path, small_lifelong_inline: tuple[Path, Path]
) -> None:
    inline, _ = small_lifelong_inline
    local, out = _run(tmp_path, "local", "--executor", "local", "--jobs", "2")
    assert (
        "[polymnesia] start  ewc_resource_0" in out
        and "[polymnesia] start  vanilla_resource_0" in out
    )
    for f in ("results/scores.jsonl", "results/items.jsonl"):
        assert _rows(local / f) == _rows(inline / f), f
    want, got = _sections(inline / "report.md"), _sections(local / "report.md")
    assert list(got) == list(want) and "## The paper's claims at this scale" in want
    for heading in want:
        if heading not in TIMED:  # wall times and throughputs differ between any two runs
            assert got[heading] == want[heading], heading
    stages = json.loads((local / "run.json").read_text())["stages"]
    built = {n for n, s in stages.items() if s.get("executor") == "local"}
    assert built == set(stages) and all(s["status"] == "run" for s in stages.values())
    assert all(
        Path(s["log"]).is_file() and Path(s["log"]).parent == local / "logs"
        for s in stages.values()
    )
    assert "start  vanilla_resource_0 > vanilla_resource_1 > vanilla_resource_2" in out
    # the same command again builds nothing and starts no child
    _, again = _run(tmp_path, "local", "--executor", "local", "--jobs", "2")
    assert "[polymnesia] start " not in again and "0 built" in again
