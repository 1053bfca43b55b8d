"""Run folders stay where they belong; reports say what is missing or damaged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.errors import PolymnesiaError
from polymnesia.experiments import load_config
from polymnesia.pipeline.run_dir import default_run_dir, prepare_run_dir
from polymnesia.pipeline.runner import check_stage_name

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")
SMALL = ["data.source=udhr", "groups.pretraining=[en,fr]", "groups.adapting=[]", "groups.other=[]"]


def _one_line(capsys) -> str:  # type: ignore[no-untyped-def]
    err = capsys.readouterr().err.strip()
    assert err.startswith("polymnesia: error:") and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("where", ["file", "proc", "sys", "under_file"])
def test_unusable_run_dir_is_one_line(isolated_cache, tmp_path, capsys, where):  # type: ignore[no-untyped-def]
    (tmp_path / "f").write_text("x")
    run_dir = {
        "file": tmp_path / "f",
        "proc": Path("/proc/polymnesia-run"),
        "sys": Path("/sys/polymnesia-run"),
        "under_file": tmp_path / "f" / "run",
    }[where]
    assert main(["run", QUICK, *SMALL, "--run-dir", str(run_dir)]) == 2
    err = _one_line(capsys)
    assert "run folder" in err or "--run-dir" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_run_dir_is_one_line(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    assert main(["run", QUICK, *SMALL, "--run-dir", str(ro / "run")]) == 2
    assert "cannot use run folder" in _one_line(capsys)


def test_read_only_failure_is_one_line(isolated_cache, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """What a non-root user gets in a read-only folder (simulated, the tests may run as root)."""
    import polymnesia.pipeline.run_dir as rd

    def refuse(*a, **k):  # type: ignore[no-untyped-def]
        raise PermissionError(13, "Permission denied", str(tmp_path / "run" / "config.yaml"))

    monkeypatch.setattr(rd, "atomic_write_yaml", refuse)
    cfg = load_config(QUICK, SMALL)
    with pytest.raises(PolymnesiaError, match="cannot use run folder .*Permission denied"):
        prepare_run_dir(tmp_path / "run", cfg)


@pytest.mark.parametrize(
    "name", ["../x", "a/b", "/tmp/x", ".", "..", "-rf", "a\\b", "a\nb", "a\n", ""]
)
def test_unsafe_names_are_refused(name: str):
    with pytest.raises(PolymnesiaError):
        check_stage_name(name)
    from polymnesia.config.checks import check_safe_name

    with pytest.raises(PolymnesiaError):
        check_safe_name(name, "name")


def test_default_run_dir_stays_under_runs(isolated_cache):  # type: ignore[no-untyped-def]
    cfg = load_config(QUICK, [*SMALL, "name=my-run_1.2"])
    assert default_run_dir(cfg).parent == Path("runs")


def _partial_run(tmp_path: Path, stages: int) -> Path:
    """A run folder whose first ``stages`` stages finished (as a killed run leaves it)."""
    import polymnesia.stages  # noqa: F401
    from polymnesia.experiments import EXPERIMENTS
    from polymnesia.pipeline.runner import run_pipeline

    cfg = load_config(QUICK, [*SMALL, "data.max_train_per_lang=50", "tokenizer.vocab_size=300"])
    specs = EXPERIMENTS.get(cfg.experiment).build(cfg)
    run = tmp_path / "run"
    prepare_run_dir(run, cfg)
    run_pipeline(specs[:stages], run, log=lambda m: None)
    return run


def test_report_of_a_killed_run_names_missing_stages(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    run = _partial_run(tmp_path, 1)
    assert main(["report", str(run)]) == 2
    err = _one_line(capsys)
    assert "is incomplete" in err and "tokenizer" in err and "pretrain" in err
    assert "data," not in err.split("(")[1]  # the finished stage is not listed


def test_report_of_torn_scores_names_the_file(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    run = _partial_run(tmp_path, 1)
    record = json.loads((run / "run.json").read_text())
    for name in ("tokenizer", "pretrain", "evaluate"):  # pretend the rest finished too
        record["stages"][name] = {"status": "run"}
    (run / "run.json").write_text(json.dumps(record))
    scores = run / "results" / "scores.jsonl"
    scores.write_text(
        '{"model": "a", "lang": "en", "metric": "x", "value": 1.0}\n{"model": "a", "la'
    )
    assert main(["report", str(run)]) == 2
    err = _one_line(capsys)
    assert f"{scores} is damaged: line 2" in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [("experiment: [", "malformed YAML"), ("name: x\n", "missing required key 'experiment'")],
)
def test_report_of_a_malformed_config_is_one_line(tmp_path, capsys, content, expected):  # type: ignore[no-untyped-def]
    (tmp_path / "config.yaml").write_text(content)
    assert main(["report", str(tmp_path)]) == 2
    assert expected in _one_line(capsys)


def test_report_of_a_missing_folder_is_one_line(tmp_path, capsys):  # type: ignore[no-untyped-def]
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in _one_line(capsys)


def test_an_error_naming_a_file_descriptor_does_not_show_it_as_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from polymnesia.pipeline import run_dir as rd

    def fail(*a: object) -> None:
        raise OSError(5, "Input/output error", 3)  # a library's error about descriptor 3

    monkeypatch.setattr(rd, "_prepare", fail)
    with pytest.raises(PolymnesiaError) as e:
        rd.prepare_run_dir(tmp_path / "run", {"name": "x"})
    assert "(3)" not in str(e.value) and "Input/output error" in str(e.value)
