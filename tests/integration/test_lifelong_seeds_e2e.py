"""lifelong pools training seeds in one run (issue 29): the smoke config, cut to two arms and one
order, run with seed 0 and then with seeds [0, 1] through the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from rebuild import assert_report_rebuilds

from polymnesia.cli.main import main

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
SMALL = [
    "methods=[vanilla,nonshared_lora]",
    "orders=[{name: res, kind: resource}]",
    "train_per_lang=16",
]


def _row(run: Path, table: str, method: str) -> dict[str, str]:
    with (run / "results" / f"{table}.csv").open(encoding="utf-8") as f:
        return next(r for r in csv.DictReader(f) if r["Method"] == method)


def test_two_seeds_pool_in_one_report_with_seed_and_item_intervals(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["run", CONFIG, *SMALL, "--run-dir", str(one)]) == 0
    capsys.readouterr()
    assert main(["run", CONFIG, *SMALL, "seeds=[0,1]", "--run-dir", str(two)]) == 0
    out = capsys.readouterr().out
    # seed 0 is the one-seed run, from the cache; seed 1 runs as NAME.seed1, data shared
    assert "reuse  vanilla_res_2" in out and "run    vanilla_res_2.seed1" in out
    stages = json.loads((two / "run.json").read_text())["stages"]
    assert {"data", "pretrain", "pretrain.seed1", "untrained.seed1"} <= set(stages)
    assert "data.seed1" not in stages
    R = two / "results" / "R"
    r0, r1 = np.load(R / "R_VANILLA_res.npy"), np.load(R / "R_VANILLA_res_seed1.npy")
    assert np.array_equal(r0, np.load(one / "results" / "R" / "R_VANILLA_res.npy"))
    assert not np.array_equal(r0, r1)  # another pretrained base and classifier

    report = (two / "report.md").read_text()
    assert "cover training seeds and test items: 2 training seeds (0, 1)" in report
    assert "mean ± t × SE over the seeds and the test items" in report
    assert "paired seeds and items: t over 2 training seeds" in report
    assert "mean over orders and over 2 training seeds" in report
    assert "(mean over 2 seeds)" in report  # the figures' captions
    assert "Intervals cover test items only" in (one / "report.md").read_text()
    # the final score is the mean over seeds of each seed's R, and its interval the seeds'
    pooled, alone = (
        _row(two, "transfer_variants", "VANILLA"),
        _row(one, "transfer_variants", "VANILLA"),
    )
    final = float(pooled["final avg"])
    assert final == pytest.approx((r0[-1].mean() + r1[-1].mean()) / 2, abs=1e-9)
    lo, hi = float(pooled["final avg_ci_low"]), float(pooled["final avg_ci_high"])
    assert lo <= final <= hi and hi > lo
    # a quarter of the replicates draw seed 0 twice, a quarter seed 1 twice: the interval
    # reaches both seeds' own finals (an item-only interval around the mean would not)
    f0, f1 = float(r0[-1].mean()), float(r1[-1].mean())
    assert lo <= min(f0, f1) + 0.01 and hi >= max(f0, f1) - 0.01
    assert float(alone["final avg"]) == pytest.approx(r0[-1].mean(), abs=1e-9)
    assert_report_rebuilds(two, isolated_cache, tmp_path / "copy", legacy=tmp_path / "old")
