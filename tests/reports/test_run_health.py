"""Every report says which training stages diverged or sat at chance, and when remote code ran."""

from __future__ import annotations

import json
from pathlib import Path

from polymnesia.experiments.reporting import run_health
from polymnesia.pipeline.run_dir import merge_stage_outputs
from polymnesia.reports.render import Report


def _stages(run: Path, warnings: dict[str, list[str]]) -> None:
    """Cache entries with the loop's ``train_health.json``, merged into the run folder."""
    entries = {}
    for name, w in warnings.items():
        entries[name] = folder = run.parent / "cache" / name
        folder.mkdir(parents=True)
        rec = {"flags": ["diverged"] if w else [], "warnings": w}
        (folder / "train_health.json").write_text(json.dumps(rec))
    merge_stage_outputs(run, entries)


def test_flags_and_trust_are_reported(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _stages(run, {"pretrain": ["the loss ended above where it started (diverged)"], "instruct": []})
    (run / "run.json").write_text(json.dumps({"trust_remote_code": True}))
    rep = Report("r")
    run_health(rep, run)
    md, _ = rep.write(run)
    text = md.read_text()
    assert "## Run health" in text and "pretrain: the loss ended above" in text
    assert "instruct:" not in text and "--trust-remote-code" in text


def test_a_healthy_run_has_no_section(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _stages(run, {"pretrain": []})
    (run / "run.json").write_text(json.dumps({"trust_remote_code": False}))
    rep = Report("r")
    run_health(rep, run)
    md, _ = rep.write(run)
    assert "Run health" not in md.read_text()
