"""The lf_mlf protocol end to end through the CLI on configs/lf_mlf_smoke.yaml (Bible, nano model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "lf_mlf_smoke.yaml")
FAST = ["methods=[uniform,lf_mlf]", "seeds=[0,1]"]


def test_lf_mlf_smoke_report(isolated_cache: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert main(["run", CONFIG, *FAST, "--run-dir", str(run)]) == 0
    assert mismatches(run, "lf_mlf_smoke", subset=True) == []  # scores as before the restructuring
    scores = read_jsonl(run / "results" / "scores.jsonl")
    models = {s["model"] for s in scores}
    assert {"Uniform-MLF", "LF-MLF", "SLF-en", "SLF-de", "SLF-fr", "base"} <= models
    acc = [s for s in scores if s["metric"] == "accuracy"]
    assert {s["group"] for s in acc} == {"source", "target"} and all(
        0 <= s["value"] <= 1 for s in acc
    )
    assert {s["seed"] for s in acc} == {0, 1}
    assert any(s["metric"] == "lm_loss" for s in scores)
    for rel in (
        "results/zero_shot.csv",
        "results/fine_tuning.csv",
        "results/forgetting.csv",
        "report.md",
    ):
        assert (run / rel).exists(), rel
    text = (run / "report.md").read_text()
    assert "Zero-shot performance" in text and "F_p" in text and "LF-MLF" in text


def test_lf_mlf_bad_input(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", CONFIG, "sources=[en]", "--dry-run"]) != 0
    assert "T >= 2" in capsys.readouterr().err
    assert main(["run", CONFIG, "methods=[uniform,nope]", "--dry-run"]) != 0
    assert "nope" in capsys.readouterr().err
    assert main(["run", CONFIG, "sources=[en,sw]", "--dry-run"]) != 0
    assert "not pretraining languages" in capsys.readouterr().err
    with pytest.warns(UserWarning, match="also sources"):
        main(["run", CONFIG, "targets=[es,en]", "--dry-run"])
