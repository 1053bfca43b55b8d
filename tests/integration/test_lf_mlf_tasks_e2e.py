"""lf_mlf with the tagging and extractive-QA task kinds (constructed Bible tasks), end to end."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from polymnesia.cli.main import main
from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lf_mlf_smoke.yaml"


def test_tagging_and_span_tasks_run_with_tasks_as_friedman_blocks(
    isolated_cache: Path, tmp_path: Path
) -> None:
    data = yaml.safe_load(SMOKE.read_text())
    del data["task"]
    data["tasks"] = [
        {"name": "genre", "kind": "sequence", "metric": "accuracy", "max_length": 32},
        {
            "name": "segments",
            "kind": "token",
            "metric": "span_f1",
            "constructed": "genre_segments",
            "max_length": 96,
            "context": "bidirectional",
        },
        {
            "name": "questions",
            "kind": "span",
            "metric": "squad_f1",
            "constructed": "genre_question",
            "max_length": 192,
            "context": "echo",
        },
    ]
    # the decoder's tagger sees the whole passage, its QA model reads the passage twice
    data.update(
        methods=["uniform", "mgda", "lf_mlf"], seeds=[0], slf=False, friedman={"blocks": "tasks"}
    )
    config = tmp_path / "tasks.yaml"
    config.write_text(yaml.safe_dump(data))
    run = tmp_path / "run"
    assert main(["run", str(config), "--run-dir", str(run)]) == 0
    scores = read_jsonl(run / "results" / "scores.jsonl")
    metrics = {(s["task"], s["metric"]) for s in scores}
    assert {
        ("genre", "accuracy"),
        ("segments", "span_f1"),
        ("questions", "squad_f1"),
        ("questions", "exact_match"),
    } <= metrics
    for s in scores:
        if s["metric"] in ("span_f1", "squad_f1", "exact_match"):
            assert 0 <= s["value"] <= 1
    text = (run / "report.md").read_text()
    assert "Friedman test with tasks as blocks" in text
    assert "The paper's claims" in text and "±0.00" not in text
    assert (run / "results" / "zero_shot_questions.csv").exists()
    # tagging and QA arms are judged against a trivial answer (genre has chance and majority)
    # (tagging: span F1 and word tag accuracy, each against the most frequent tag)
    for task, answer, metrics in (
        ("segments", "most frequent tag", 2),
        ("questions", "whole passage", 1),
    ):
        rows = (run / "results" / f"baselines_{task}.csv").read_text()
        assert answer in rows and rows.count("\n") == 1 + 3 * metrics, rows  # header + arms
    words = [s for s in scores if s["task"] == "segments" and s["metric"] == "accuracy"]
    assert words and all(s["ci_low"] <= s["value"] <= s["ci_high"] for s in words)
    assert all(0 < s["extra"]["trivial_baseline"]["value"] < 1 for s in words)
    assert "Word tag accuracy" in text
    base = [s for s in scores if s["task"] == "questions" and s["metric"] == "squad_f1"]
    assert all(0 < s["extra"]["trivial_baseline"]["value"] <= 1 for s in base)
    assert "arms score above the trivial answer" in text
    # the tagger was fine-tuned and saved without its causal mask; the QA inputs hold the
    # passage twice
    stages = yaml.safe_load((run / "run.json").read_text())["stages"]
    tagger = Path(stages["ft_main_segments_uniform_s0"]["entry"]) / "model" / "config.json"
    assert yaml.safe_load(tagger.read_text())["is_causal"] is False
    answerer = Path(stages["ft_main_questions_uniform_s0"]["entry"]) / "model" / "config.json"
    assert yaml.safe_load(answerer.read_text()).get("is_causal", True) is not False
    # F_p names the task whose model it measures: a column and claims per task (pooled, one
    # language held three item sets of an arm and no paired test was possible)
    fp = {s["task"] for s in scores if s["group"] == "forgetting" and s["model"] != "base"}
    assert fp == {"genre", "segments", "questions"}
    forgetting = (run / "results" / "forgetting.md").read_text()
    assert "genre" in forgetting and "segments" in forgetting and "questions" in forgetting
    for task in ("genre", "segments", "questions"):
        assert f"{task}: LF-MLF forgets the pretraining objective less than MGDA" in text
