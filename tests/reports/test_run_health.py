"""Every report says which training stages diverged or sat at chance, and when remote code ran."""

from __future__ import annotations

import json
from pathlib import Path

from polymnesia.experiments.reporting import run_health
from polymnesia.reports.render import Report


def _stage(run: Path, name: str, warnings: list[str]) -> None:
    folder = run / "stages" / name
    folder.mkdir(parents=True)
    rec = {"flags": ["diverged"] if warnings else [], "warnings": warnings}
    (folder / "train_health.json").write_text(json.dumps(rec))


def test_flags_and_trust_are_reported(tmp_path: Path) -> None:
    _stage(tmp_path, "pretrain", ["the loss ended above where it started (diverged)"])
    _stage(tmp_path, "instruct", [])
    (tmp_path / "run.json").write_text(json.dumps({"trust_remote_code": True}))
    rep = Report("r")
    run_health(rep, tmp_path)
    md, _ = rep.write(tmp_path)
    text = md.read_text()
    assert "## Run health" in text and "pretrain: the loss ended above" in text
    assert "instruct:" not in text and "--trust-remote-code" in text


def test_a_healthy_run_has_no_section(tmp_path: Path) -> None:
    _stage(tmp_path, "pretrain", [])
    (tmp_path / "run.json").write_text(json.dumps({"trust_remote_code": False}))
    rep = Report("r")
    run_health(rep, tmp_path)
    md, _ = rep.write(tmp_path)
    assert "Run health" not in md.read_text()
