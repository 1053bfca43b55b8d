"""The active_forgetting protocol end to end through the CLI on its smoke config."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from rebuild import assert_report_rebuilds

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.items import run_items
from polymnesia.reports.verdicts import VERDICTS
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
    values = [
        c for c in rows[0] if c.startswith("mu_") and not c.endswith(("_ci_low", "_ci_high", "_n"))
    ]
    assert values == ["mu_pretraining", "mu_adapting", "mu_other", "mu_overall"]
    assert "mu_overall_ci_low" in rows[0]  # self-similarity has per-word items
    report = (run_dir / "report.md").read_text("utf-8")
    for needle in ("Table 1", "Table 2", "Table 3", "Table 4", "fertility", "claims"):
        assert needle.lower() in report.lower(), needle
    assert (run_dir / "report.html").exists()
    # per-item evidence and intervals behind the downstream numbers
    for metric in ("chrf", "bleu", "accuracy", "macro_f1", "self_similarity_adjusted"):
        assert all(s.n and s.ci_low is not None for s in scores if s.metric == metric), metric
    items = run_items(run_dir)
    assert {(s.task, s.kind) for s in items} == {
        ("lm", "lm"),
        ("translation", "stats"),
        ("genre", "label"),
        ("isotropy", "values"),
    }
    # three-verdict claims with effect, CI and n; baselines; the translation floor
    with open(run_dir / "results" / "claims.csv", encoding="utf-8") as f:
        claims = list(csv.DictReader(f))
    assert len(claims) == 9 and {
        c["Verdict"].split(":")[0].split(" ", 1)[-1] for c in claims
    } <= set(VERDICTS)
    assert all(c["n"] and "[" in c["Effect [95% CI]"] for c in claims)
    assert "does not hold" not in report
    assert "of the paper's 9 claims were testable at this scale; of those" in report
    for name in ("genre_baselines", "translation_floor"):
        assert (run_dir / "results" / f"{name}.csv").is_file(), name
    with open(run_dir / "results" / "accuracy.csv", encoding="utf-8") as f:
        header = next(csv.reader(f))
    assert "mu_overall_ci_low" in header and "mu_overall_n" in header
    assert_report_rebuilds(run_dir, isolated_cache, tmp_path / "copy")


@pytest.mark.integration
def test_reset_interval_not_below_steps_is_one_line(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = ROOT / "configs" / "active_forgetting_smoke.yaml"
    rc = main(["run", str(cfg), "forgetting.reset_every=12", "--run-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "smaller than train.steps" in err[0]
    assert not (tmp_path / "r" / "results").exists()


@pytest.mark.integration
def test_harness_section_scores_every_arm(isolated_cache: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    harness = (
        "evaluate.harness={tasks: [poly_genre_en, poly_continue_mc_fr], limit: 6, docs_per_task: 6}"
    )
    cfg = str(ROOT / "configs" / "active_forgetting_smoke.yaml")
    assert main(["run", cfg, harness, "--run-dir", str(run_dir)]) == 0
    scores = read_scores(run_dir / "results" / "scores.jsonl")
    got = {(s.model, s.task, s.metric) for s in scores if "lm_eval_version" in s.extra}
    assert got == {
        (arm, task, metric)
        for arm in ("Baseline", "BA", "AFA")
        for task, metric in (
            ("poly_genre_en", "acc"),
            ("poly_continue_mc_fr", "acc"),
            ("poly_continue_mc_fr", "acc_norm"),
        )
    }
    assert all(s.extra["n_samples"] == 6 for s in scores if "lm_eval_version" in s.extra)
    table = (run_dir / "results" / "harness.md").read_text("utf-8")
    assert "poly_genre_en" in table and "AFA" in table
    assert "lm-evaluation-harness" in (run_dir / "report.md").read_text("utf-8")
    # the other stages are the smoke run's: their scores are unchanged
    assert mismatches(run_dir, "active_forgetting_smoke", subset=True) == [
        m for m in mismatches(run_dir, "active_forgetting_smoke", subset=True) if "poly_" in m
    ]


@pytest.mark.integration
def test_two_seeds_pool_on_one_test_sample(isolated_cache: Path, tmp_path: Path) -> None:
    """Issue 29: a pooled run's seeds are scored on the same verses (downstream.sample_seed),
    so its downstream tests share their item resamples among the seeds; the report builds
    even where the seeds' items differ (isotropy words follow each seed's tokenizer)."""
    run_dir = tmp_path / "run"
    cfg = str(ROOT / "configs" / "active_forgetting_smoke.yaml")
    assert main(["run", cfg, "seeds=[0,1]", "--run-dir", str(run_dir)]) == 0
    with open(run_dir / "results" / "claims.csv", encoding="utf-8") as f:
        claims = {c["Claim (paper)"]: c for c in csv.DictReader(f)}
    assert len(claims) == 9
    assert all(c["Test"].startswith("paired seeds and items: t over 2") for c in claims.values())
    for statement in ("AFA has higher chrF than BA", "AFA has higher genre accuracy than BA"):
        assert "shared by the seeds" in claims[statement]["Test"], statement
    with open(run_dir / "results" / "translation_floor.csv", encoding="utf-8") as f:
        floors = list(csv.DictReader(f))
    assert len(floors) == 3 and all("(3 languages)" in str(r) for r in floors)
    by_stage: dict[str, set[tuple[str, tuple[str, ...]]]] = {}
    for s in run_items(run_dir):
        if s.task in ("translation", "genre") and s.model == "AFA":
            by_stage.setdefault(str(s.stage), set()).add((s.lang, tuple(map(str, s.ids))))
    assert set(by_stage) == {
        "translation_AFA",
        "translation_AFA.seed1",
        "zero_shot_AFA",
        "zero_shot_AFA.seed1",
    }
    for kind in ("translation_AFA", "zero_shot_AFA"):  # the same verses in both seeds
        assert by_stage[kind] == by_stage[f"{kind}.seed1"], kind
