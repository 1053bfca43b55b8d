"""The active_forgetting protocol end to end through the CLI on its smoke config."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.results import read_scores

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration
def test_smoke_run_produces_all_tables(isolated_cache: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert (
        main(
            [
                "run",
                str(ROOT / "configs" / "active_forgetting_smoke.yaml"),
                "--run-dir",
                str(run_dir),
            ]
        )
        == 0
    )
    assert mismatches(run_dir, "active_forgetting_smoke") == []
    scores = read_scores(run_dir / "results" / "scores.jsonl")
    langs = {"en", "es", "fr", "de"}
    for metric in ("bits_per_byte", "self_similarity_adjusted", "chrf", "bleu", "accuracy"):
        by_arm = {s.model for s in scores if s.metric == metric}
        assert by_arm == {"Baseline", "BA", "AFA"}, metric
    assert {s.lang for s in scores if s.metric == "accuracy"} == langs
    assert {s.lang for s in scores if s.metric == "chrf"} == langs - {"en"}
    vocab = {s.setting: s.value for s in scores if s.metric == "vocab_size"}
    assert vocab["merged"] > vocab["base"]
    # the merge makes the adapting language cheaper to encode, and never dearer for English
    fert = {
        (s.lang, s.setting): s.value
        for s in scores
        if s.metric == "fertility_tokens_per_byte" and s.model == "BA"
    }
    assert fert[("fr", "merged")] < fert[("fr", "base")]
    assert fert[("en", "merged")] <= fert[("en", "base")]
    with open(run_dir / "results" / "self_similarity_adjusted.csv", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0][-4:] == ["mu_pretraining", "mu_adapting", "mu_other", "mu_overall"]
    report = (run_dir / "report.md").read_text("utf-8")
    for needle in ("Table 1", "Table 2", "Table 3", "Table 4", "fertility", "claims"):
        assert needle.lower() in report.lower(), needle
    assert (run_dir / "report.html").exists()


@pytest.mark.integration
def test_reset_interval_not_below_steps_is_one_line(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = ROOT / "configs" / "active_forgetting_smoke.yaml"
    rc = main(["run", str(cfg), "forgetting.reset_every=12", "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "smaller than train.steps" in err[0]
    assert not (tmp_path / "r" / "results").exists()
