"""Training seeds end to end: the quickstart with seeds [0, 1] on the packaged UDHR, a nano
model.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from smoke import SMOKE

from polymnesia.cli.main import main

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


def test_two_seeds_share_data_and_report_seed_and_item_intervals(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "two"
    assert main(["run", CONFIG, *SMOKE, "seeds=[0,1]", "--run-dir", str(run)]) == 0
    stages = json.loads((run / "run.json").read_text())["stages"]
    assert {"data", "pretrain", "pretrain.seed1", "evaluate.seed1"} <= set(stages)
    assert "data.seed1" not in stages
    # each stage's record says which seeds it serves: the data both, a later seed's copy its own
    assert stages["data"]["seeds"] == [0, 1] and stages["pretrain"]["seeds"] == [0]
    assert (stages["pretrain.seed1"]["seeds"], stages["pretrain.seed1"]["unseeded"]) == (
        [1],
        "pretrain",
    )
    report = (run / "report.md").read_text()
    assert "cover training seeds and test items: 2 training seeds (0, 1)" in report
    assert "training seeds (Student t) and test items (bootstrap)" in report
    with (run / "results" / "table1_bits_per_byte.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows and all(float(r["mu_overall"]) > 0 for r in rows)
    # seed 1 alone is the run's second seed: every stage comes from the cache
    capsys.readouterr()
    solo = tmp_path / "solo"
    assert main(["run", CONFIG, *SMOKE, "seed=1", "--run-dir", str(solo)]) == 0
    out = capsys.readouterr().out
    assert out.count("[polymnesia] reuse ") == 4 and "run    " not in out
    assert "Intervals cover test items only" in (solo / "report.md").read_text()
