"""Two training seeds pooled in one two_phase run, end to end through the CLI on
configs/two_phase_smoke.yaml (shrunk: no mixture, LoRA as the only mitigation, two harness
tasks per ability): one pipeline per seed, a report whose numbers are means over seeds with
intervals over seeds and documents, rebuilt byte for byte from the run folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rebuild import assert_report_rebuilds

from polymnesia.cli.main import main
from polymnesia.experiments.two_phase.abilities import ability, pooled_interval
from polymnesia.items import run_items

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml")
ENGLISH = ["poly_genre_en", "poly_reference_en"]
SMALL = [
    "seeds=[0,1]",
    "mixture=false",
    "mitigation.replay=[]",
    "mitigation.freezing=[]",
    f"evaluate.harness.english=[{','.join(ENGLISH)}]",
    "evaluate.harness.multilingual=[poly_continue_mc_fr,poly_reference_fr]",
]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_two_seeds_pool_into_one_report(isolated_cache: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, *SMALL, "--run-dir", str(run)]) == 0
    stages = json.loads((run / "run.json").read_text())["stages"]
    # one pipeline per seed; only the prepared data takes no seed and is shared
    assert {
        "p1_english",
        "p1_english.seed1",
        "eval_mit_LoRA.seed1",
        "drift_english__dissimilar.seed1",
    } <= set(stages)
    assert "data.seed1" not in stages
    report = (run / "report.md").read_text()
    assert "cover training seeds and test items: 2 training seeds (0, 1)" in report
    assert "within seed noise" not in report and "seed-noise band" not in report
    claims = _rows(run / "results" / "claims.csv")
    assert len(claims) >= 5
    paired = [c for c in claims if c["Design"] != "correlation"]  # DES/MPD: over pairs
    assert all("paired seeds and items: t over 2 training seeds" in c["Test"] for c in paired)
    over_pairs = [c for c in claims if c["Design"] == "correlation"]
    assert all(c["Test"].startswith("Spearman rank correlation over pairs") for c in over_pairs)
    verdicts = {c["Claim (paper)"]: c["Verdict"] for c in claims}
    assert any(s.startswith("LoRA gains less multilingual ability") for s in verdicts)
    # Table 1's average after Phase 1 is the mean over both seeds' documents, with the
    # interval over the seeds and exactly those items
    sets = [s for s in run_items(run) if s.kind == "docs"]
    per_seed = [
        ability([s for s in sets if s.stage == stage], ENGLISH, "p1_english")
        for stage in ("eval_p1_english", "eval_p1_english.seed1")
    ]
    want = pooled_interval(per_seed, seed=0)
    assert "2 training seeds" in want.method
    row = _rows(run / "results" / "table1_ea.csv")[0]
    got = [float(row[f"Average P1{k}"]) for k in ("", "_ci_low", "_ci_high")]
    assert got == pytest.approx([want.estimate, want.low, want.high])
    assert int(row["Average P1_n"]) == want.n
    # DES and MPD: one row per pair, the mean over seeds with an interval over seeds
    des = _rows(run / "results" / "table3_des.csv")
    assert [r["Phase 1 -> Phase 2"] for r in des] == ["english -> similar", "english -> dissimilar"]
    assert all(float(r["DES_ci_low"]) <= float(r["DES"]) <= float(r["DES_ci_high"]) for r in des)
    for name in ("fig1_tsne_english__similar_seed0", "fig1_tsne_english__similar_seed1"):
        assert (run / "figures" / f"{name}.png").is_file(), name
    assert "Figure 2: per-layer covariance change against the Phase 1 model, mean over 2" in report
    assert_report_rebuilds(run, isolated_cache, tmp_path / "copy", legacy=tmp_path / "old")
