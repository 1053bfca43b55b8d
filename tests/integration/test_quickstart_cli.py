"""The quickstart protocol end to end through the CLI, on the packaged UDHR with a nano model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rebuild import assert_report_rebuilds
from smoke import SMOKE

from golden import mismatches
from polymnesia.cli.main import main
from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")
FAULTS = Path(__file__).resolve().parents[1] / "faults.py"


def run_cli(*args: str) -> int:
    return main(["run", CONFIG, *SMOKE, *args])


def test_run_writes_tables_plots_report_and_reuses(isolated_cache: Path, tmp_path: Path, capsys):
    run = tmp_path / "run"
    assert run_cli("--run-dir", str(run)) == 0
    assert mismatches(run, "quickstart") == []  # the scores recorded before the restructuring
    for rel in (
        "config.yaml",
        "run.json",
        "metrics.jsonl",
        "results/scores.jsonl",
        "report.md",
        "report.html",
        "results/table1_bits_per_byte.csv",
        "results/table1_bits_per_byte.md",
        "results/bits_per_byte_by_language.csv",
        "plots/bits_per_byte_by_language.png",
        "plots/training_loss.png",
    ):
        assert (run / rel).is_file(), rel
    scores = read_jsonl(run / "results" / "scores.jsonl")
    langs = {s["lang"] for s in scores if s["metric"] == "bits_per_byte"}
    assert langs == {"en", "ru", "ar", "zh", "fr", "ja", "de", "hi"}
    assert all(s["value"] > 0 for s in scores)
    table = (run / "results" / "table1_bits_per_byte.md").read_text()
    assert "mu_pretraining" in table and "mu_overall" in table and "Baseline" in table
    report = (run / "report.md").read_text()
    assert "plots/bits_per_byte_by_language.png" in report
    # a second run of the same config reuses every stage
    capsys.readouterr()
    assert run_cli("--run-dir", str(run)) == 0
    out = capsys.readouterr().out
    assert out.count("[polymnesia] reuse ") == 4 and "run    " not in out
    assert ": 0 built, 4 reused from the cache\n" in out  # the closing summary
    # the report can be rebuilt from the saved scores alone
    (run / "report.md").unlink()
    assert main(["report", str(run)]) == 0 and (run / "report.md").is_file()
    assert_report_rebuilds(run, isolated_cache, tmp_path / "copy")


def test_dry_run_prints_config_and_plan(isolated_cache: Path, capsys):
    assert run_cli("--dry-run") == 0
    out = capsys.readouterr().out
    assert "experiment: language_modeling" in out
    for stage in ("data", "tokenizer", "pretrain", "evaluate"):
        assert f" {stage} " in out
    assert not (isolated_cache / "stages").exists()


def test_run_folder_of_another_config_is_refused(isolated_cache: Path, tmp_path: Path, capsys):
    run = tmp_path / "run"
    assert run_cli("--run-dir", str(run), "--dry-run") == 0
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"config_hash": "0" * 64}))
    assert run_cli("--run-dir", str(run)) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds a run of a different config" in err and len(err.splitlines()) == 1


def test_killed_run_resumes_to_the_same_result(isolated_cache: Path, tmp_path: Path):
    env = {**os.environ, "POLYMNESIA_CACHE": str(isolated_cache)}
    args = ["run", CONFIG, *SMOKE, "train.steps=8", "--run-dir"]
    cmd = [sys.executable, "-m", "polymnesia", *args]
    killed = subprocess.run(  # SIGKILL after step 6, before its checkpoint (tests/faults.py)
        [sys.executable, str(FAULTS), "kill-at-checkpoint=6", "--", *args, str(tmp_path / "a")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -9, killed.stderr  # mid-training, after the checkpoint at step 3
    resumed = subprocess.run([*cmd, str(tmp_path / "a")], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "resume pretrain" in resumed.stdout
    # an uninterrupted run of the same config in a fresh cache
    fresh = {**env, "POLYMNESIA_CACHE": str(tmp_path / "cache2")}
    (tmp_path / "cache2" / "data").mkdir(parents=True)
    full = subprocess.run([*cmd, str(tmp_path / "b")], env=fresh, capture_output=True, text=True)
    assert full.returncode == 0, full.stderr

    def final(run: str) -> tuple[list[float], dict[str, float]]:
        losses = [r["loss"] for r in read_jsonl(tmp_path / run / "metrics.jsonl")]
        scores = {
            f"{s['lang']}/{s['metric']}": s["value"]
            for s in read_jsonl(tmp_path / run / "results" / "scores.jsonl")
        }
        return losses, scores

    (la, sa), (lb, sb) = final("a"), final("b")
    assert la == pytest.approx(lb, abs=1e-5) and len(la) == 8
    assert sa == pytest.approx(sb, rel=1e-5)


def test_sigterm_says_one_line_and_the_run_resumes(isolated_cache: Path, tmp_path: Path):
    env = {**os.environ, "POLYMNESIA_CACHE": str(isolated_cache)}
    args = ["run", CONFIG, *SMOKE, "train.steps=8", "--run-dir", str(tmp_path / "a")]
    termed = subprocess.run(  # SIGTERM as the loop is about to write checkpoint 6
        [sys.executable, str(FAULTS), "term-at-checkpoint=6", "--", *args],
        env=env,
        capture_output=True,
        text=True,
    )
    assert termed.returncode == 143, termed.stderr
    assert "Traceback" not in termed.stderr
    assert termed.stderr.strip().splitlines()[-1] == (
        "polymnesia: terminated (SIGTERM); run the same command again to resume"
    )
    resumed = subprocess.run(
        [sys.executable, "-m", "polymnesia", *args], env=env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resume pretrain" in resumed.stdout
    assert len(read_jsonl(tmp_path / "a" / "metrics.jsonl")) == 8


def test_bad_inputs_give_one_line(isolated_cache: Path, tmp_path: Path, capsys):
    cases = [
        (["model.preset=huge"], "unknown model preset 'huge'"),
        (["data.source=bibel"], "unknown data source 'bibel' (did you mean 'bible'?)"),
        (["groups.other=[xx]"], "unknown language code 'xx'"),
        (["train.stpes=3"], "unknown key 'train.stpes' (did you mean 'steps'?)"),
        (["train.lr=-1"], "bad value for 'train.lr'"),
    ]
    for overrides, expected in cases:
        assert main(["run", CONFIG, *SMOKE, *overrides, "--dry-run"]) == 2
        err = capsys.readouterr().err.strip()
        assert expected in err, err
        assert len(err.splitlines()) == 1
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "config file not found" in capsys.readouterr().err


def test_complete_entries_drop_their_checkpoints(isolated_cache: Path, tmp_path: Path):
    assert run_cli("--run-dir", str(tmp_path / "run")) == 0
    entry = (tmp_path / "run" / "stages" / "pretrain").resolve()
    assert (entry / "_complete.json").is_file() and (entry / "model").is_dir()
    assert not (entry / "checkpoints").exists()
