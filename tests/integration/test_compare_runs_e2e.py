"""`polymnesia compare` on two real runs of one protocol that share their test items."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polymnesia.cli.main import main

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_compare_pairs_the_arms_of_two_runs_item_by_item(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = str(ROOT / "configs" / "active_forgetting_smoke.yaml")
    a, b = tmp_path / "every4", tmp_path / "every3"
    assert main(["run", cfg, "--run-dir", str(a)]) == 0
    # only the active-forgetting arm changes; the others reuse the first run's entries
    assert main(["run", cfg, "forgetting.reset_every=3", "--run-dir", str(b)]) == 0
    capsys.readouterr()
    out = tmp_path / "cmp"
    # a fresh process, as a user runs it: it must read every kind of item (translation
    # statistics included) without the stages that wrote them being imported
    proc = subprocess.run(
        [sys.executable, "-m", "polymnesia", "compare", str(a), str(b), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = (out / "compare.md").read_text(encoding="utf-8")
    section = md.split("## Paired differences from the first run", 1)[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ")][2:]
    assert rows, section
    models = {r[0].strip("| ") for r in rows}
    assert models == {"AFA"}, models  # the other arms are the very same models on the same items
    assert "paired scores are identical in both runs" in section
    lm = [r for r in rows if r[1] == "lm" and r[4] == "bits_per_byte"]
    assert len(lm) == 3 and all(int(r[8]) > 0 for r in lm)  # one per language group
    assert all(r[5] == "every3 − every4" for r in rows)
