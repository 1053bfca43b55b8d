"""Command-line input a researcher plausibly gets wrong: one line each, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from polymnesia.cli.main import main
from polymnesia.config.loader import parse_yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("polymnesia: error:") and len(err.splitlines()) == 1, err
    return err


def test_overrides_may_follow_the_options(isolated_cache, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["run", QUICK, "--dry-run", "train.steps=7", "train.lr=0.002"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out.split("\n# run folder")[0])
    assert resolved["train"]["steps"] == 7 and resolved["train"]["lr"] == 0.002
    # before and after the options, in order: the later override wins
    assert main(["run", QUICK, "train.steps=5", "--dry-run", "train.steps=9"]) == 0
    assert yaml.safe_load(capsys.readouterr().out.split("\n# run folder")[0])["train"]["steps"] == 9
    with pytest.raises(SystemExit) as e:
        main(["run", QUICK, "--dry-run", "--no-such-flag"])
    assert e.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_a_config_folder_is_named_as_such(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", str(tmp_path)]) == 2
    assert f"config {tmp_path} is a folder; name a YAML file" in one_error_line(capsys)


def test_yaml_merge_keys_merge() -> None:
    data = parse_yaml("base: &b {steps: 10, lr: 0.1}\ntrain:\n  <<: *b\n  lr: 0.2\n")
    assert data["train"] == {"steps": 10, "lr": 0.2}


def test_a_bad_freezing_pattern_is_refused_when_the_config_is_read(isolated_cache, capsys) -> None:  # type: ignore[no-untyped-def]
    arm = "mitigation.freezing=[{name: a, strategy: most_changed, top_k: 1, pattern: '(['}]"
    assert main(["run", str(CONFIGS / "two_phase_smoke.yaml"), arm, "--dry-run"]) == 2
    err = one_error_line(capsys)
    assert "'mitigation.freezing.0.pattern': '([': not a regular expression" in err, err


def test_the_dry_run_refuses_a_run_folder_the_run_would_refuse(
    isolated_cache, tmp_path, capsys
) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"config_hash": "0123456789abcdef"}')
    argv = ["run", QUICK, "--run-dir", str(run), "--dry-run"]
    assert main(argv) == 2
    assert "already holds a run of a different config (hash 01234567" in one_error_line(capsys)
    assert sorted(p.name for p in run.iterdir()) == ["run.json"]  # nothing written
    (tmp_path / "afile").write_text("x")
    assert main(["run", QUICK, "--run-dir", str(tmp_path / "afile"), "--dry-run"]) == 2
    assert "is a file, not a folder" in one_error_line(capsys)


@pytest.mark.parametrize("value", ["-5", "nan", "inf", "soon"])
def test_the_lock_timeout_is_a_finite_number_of_seconds(value, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as e:
        main(["run", QUICK, f"--lock-timeout={value}", "--dry-run"])
    assert e.value.code == 2
    assert "argument --lock-timeout:" in capsys.readouterr().err


def test_compare_refuses_an_output_it_cannot_write(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "afile").write_text("x")
    assert main(["compare", str(tmp_path), "--out", str(tmp_path / "afile")]) == 2
    assert "is a file; name a folder for compare.md" in one_error_line(capsys)
    assert main(["compare", str(tmp_path), "--out", "/proc/polymnesia-compare"]) == 2
    assert "cannot write the comparison to /proc/polymnesia-compare" in one_error_line(capsys)
