"""`polymnesia compare` on two real runs of one protocol that share their test items."""

from __future__ import annotations

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
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    md = (out / "compare.md").read_text(encoding="utf-8")
    section = md.split("## Paired differences from the first run", 1)[1]
    rows = [line.split(" | ") for line in section.splitlines() if line.startswith("| ")][2:]
    assert rows, section
    by = {(r[0].strip("| "), r[4], r[2]): r for r in rows}
    same = by[("Baseline", "bits_per_byte", "pretraining")]
    assert same[6] == "+0 [+0, +0]" and int(same[8]) > 0  # the very same model and items
    changed = [r for (model, metric, _), r in by.items() if model == "AFA"]
    assert changed and any(not r[6].startswith("+0 [") for r in changed)
    assert all(r[5] == "every3 − every4" for r in rows)
