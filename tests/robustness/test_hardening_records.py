"""Issue 45, items 3, 4 and 6: duplicated or missing score records, absurd numbers and
settings that were accepted are one line each, and ``run`` refuses a training stage that the
memory planner says cannot fit, before anything trains."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_helpers import TINY_RUN, refused

from polymnesia.cli.main import main
from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.results import Score, read_scores, write_scores

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")
NEW_TOKENS = str(CONFIGS / "new_token_init_smoke.yaml")
TWO_PHASE = str(CONFIGS / "two_phase_smoke.yaml")
#: a decoder of about 3 TB of weights, gradients and AdamW states: fits no machine
HUGE_MODEL = [
    "model.hidden_size=16384",
    "model.intermediate_size=65536",
    "model.num_hidden_layers=48",
]


def _scores() -> list[Score]:
    return [
        Score("Baseline", "en", "perplexity", 177.6, group="pretraining", stage="evaluate"),
        Score("Baseline", "fr", "perplexity", 160.2, group="pretraining", stage="evaluate"),
    ]


# -- item 3: duplicated score records; item 6: an empty scores file -----------------------


@pytest.mark.parametrize("value", [177.6, 1.0])  # the same line twice, or another number
def test_a_score_key_given_twice_is_refused_naming_the_key_and_file(tmp_path, value):  # type: ignore[no-untyped-def]
    path = tmp_path / "scores.jsonl"
    first = _scores()[0]
    write_scores(path, [*_scores(), Score(**{**first.to_dict(), "value": value})])
    with pytest.raises(DataError) as e:
        read_scores(path)
    line = str(e.value)
    assert str(path) in line and "records 1 and 3" in line
    assert "model=Baseline, lang=en, metric=perplexity" in line and "\n" not in line


def test_the_same_cell_from_two_stages_is_not_a_duplicate(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "scores.jsonl"  # seeds: evaluate and evaluate__seed1 score one cell
    write_scores(path, [*_scores(), Score(**{**_scores()[0].to_dict(), "stage": "evaluate_s1"})])
    assert len(read_scores(path)) == 3


def test_an_empty_scores_file_is_one_line_naming_it(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "scores.jsonl"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match="holds no score records") as e:
        read_scores(path)
    assert str(path) in str(e.value)


def test_report_and_compare_refuse_damaged_records_and_a_folder_for_report_md(
    isolated_cache, tmp_path, capsys
):  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    assert main(["run", QUICK, *TINY_RUN, "--run-dir", str(run)]) == 0
    scores = run / "results" / "scores.jsonl"
    lines = scores.read_text(encoding="utf-8").splitlines(keepends=True)

    dup = tmp_path / "dup"
    shutil.copytree(run, dup)
    (dup / "results" / "scores.jsonl").write_text("".join([*lines, lines[0]]), encoding="utf-8")
    for argv in (
        ["report", str(dup)],
        ["compare", str(run), str(dup), "--out", str(tmp_path / "cmp")],
    ):
        err = refused(capsys, argv)
        assert str(dup / "results" / "scores.jsonl") in err and "records 1 and" in err
        assert "model=Baseline" in err

    empty = tmp_path / "empty"
    shutil.copytree(run, empty)
    (empty / "results" / "scores.jsonl").write_text("", encoding="utf-8")
    for argv in (
        ["report", str(empty)],
        ["compare", str(run), str(empty), "--out", str(tmp_path / "cmp")],
    ):
        err = refused(capsys, argv)
        assert "holds no score records" in err and "bar_by_language" not in err

    folder = tmp_path / "folder"
    shutil.copytree(run, folder)
    (folder / "report.md").unlink()
    (folder / "report.md").mkdir()
    err = refused(capsys, ["report", str(folder)])
    assert f"cannot write {folder / 'report.md'}: a folder" in err


def test_an_atomic_write_onto_a_folder_is_one_line(tmp_path):  # type: ignore[no-untyped-def]
    from polymnesia.io import atomic_write_text

    (tmp_path / "x.md").mkdir()
    with pytest.raises(PolymnesiaError, match="a folder of that name is in its place"):
        atomic_write_text(tmp_path / "x.md", "text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.md"]  # no temporary file left


# -- item 4: absurd numbers ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "override", "dry-run"])
def test_an_integer_of_thousands_of_digits_is_one_line(isolated_cache, tmp_path, capsys, where):  # type: ignore[no-untyped-def]
    digits = "1" * 4400  # beyond Python's 4,300-digit limit of int()
    if where == "file":
        text = Path(QUICK).read_text(encoding="utf-8").replace("seed: 0", f"seed: {digits}", 1)
        path = tmp_path / "c.yaml"
        path.write_text(text, encoding="utf-8")
        err = refused(capsys, ["validate", str(path)])
    elif where == "override":
        err = refused(capsys, ["validate", QUICK, "--set", f"train.steps={digits}"])
    else:
        err = refused(capsys, ["run", QUICK, f"train.steps={digits}", "--dry-run"])
    assert "an integer of 4,400 digits" in err and "at most 100 digits" in err


def test_a_value_too_long_is_one_line(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", "description=" + "x" * 20_000])
    assert "a value of 20,000 characters" in err


def test_an_override_given_as_a_config_path_is_one_line(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "train.steps=" + "1" * 4400])  # no --set
    assert "cannot read config train.steps=111" in err and "File name too long" in err


def _argparse_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert not any("Traceback" in x for x in lines)
    return lines[-1]


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--memory", "9" * 400, "out of range; accepted: 1MB to 1PB"),
        ("--memory", "0.0000001B", "out of range; accepted: 1MB to 1PB"),
        ("--memory", "2PB", "out of range; accepted: 1MB to 1PB"),
        ("--devices", str(10**30), "out of range; accepted: 1 to 1,000,000 devices"),
        ("--devices", "0", "out of range; accepted: 1 to 1,000,000 devices"),
        ("--devices", "1.5", "not a whole number of devices"),
    ],
)
def test_plan_memory_and_devices_have_ranges(isolated_cache, capsys, option, value, says):  # type: ignore[no-untyped-def]
    assert says in _argparse_error(capsys, ["plan", QUICK, option, value])


def test_plan_memory_sizes_in_range_are_read():  # type: ignore[no-untyped-def]
    from polymnesia.cli.plan import memory_size

    assert memory_size("80GB") == memory_size("80GiB") == 80 * 2**30
    assert memory_size("1MB") == 2**20 and memory_size("1PB") == 2**50


def test_run_refuses_a_stage_that_cannot_fit_before_anything_runs(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    run = tmp_path / "run"
    err = refused(capsys, ["run", QUICK, *TINY_RUN, *HUGE_MODEL, "--run-dir", str(run)])
    assert "stage 'pretrain' needs about 2884.2 GiB" in err
    assert ("available RAM" in err or "on the cuda device" in err) and "it would fit with" in err
    assert "--no-memory-check" in err
    assert not run.exists()  # nothing ran: no run folder, no cache entry
    assert not list((isolated_cache / "stages").glob("*/*"))


def test_no_memory_check_runs_a_stage_the_planner_refuses(
    isolated_cache, tmp_path, capsys, monkeypatch
):  # type: ignore[no-untyped-def]
    import polymnesia.experiments.planning as planning
    import polymnesia.training.memory_fit as memory_fit

    one_mib = lambda device=None, processes=1: 2**20  # noqa: E731
    monkeypatch.setattr(memory_fit, "device_bytes", one_mib)  # the training loop's own check
    monkeypatch.setattr(planning, "device_bytes", one_mib)  # run's check before any stage
    monkeypatch.setitem(memory_fit.CHECKS, "enabled", True)
    argv = ["run", QUICK, *TINY_RUN, "--run-dir", str(tmp_path / "run")]
    err = refused(capsys, argv)
    assert "but this machine has 0.001 GiB" in err
    assert main([*argv, "--no-memory-check"]) == 0  # the loop's own check is off too
    assert (tmp_path / "run" / "report.md").is_file()


def test_the_planner_never_refuses_the_shipped_preset_configs_on_a_24_gib_machine():  # type: ignore[no-untyped-def]
    """Every shipped config whose models are presets (the tiny and smoke ones; the ``*_paper``
    configs name Hub models) plans below 2 GiB per stage on a CPU; the estimates are within
    0.81-1.09 of the measured peaks (docs/benchmarks.md), so well below 24 GiB."""
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments.planning import stage_plans
    from polymnesia.experiments.preflight import build_specs

    checked = 0
    for path in sorted(CONFIGS.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        if "name_or_path" in text or "instruct_model" in text:
            continue
        cfg = load_config(str(path), [])
        specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, str(path))
        plans = stage_plans(specs, device_type="cpu")
        worst = max(plans, key=lambda p: p.total)
        assert worst.total < 2 * 2**30, (path.name, worst.label, worst.line())
        assert worst.total > 20 * 2**20  # not absurdly low either: overhead and weights
        checked += 1
    assert checked >= 12
    tiny = load_config(QUICK, TINY_RUN)
    plans = stage_plans(
        build_specs(EXPERIMENTS.get(tiny.experiment), tiny, QUICK), device_type="cpu"
    )
    assert max(p.total for p in plans) < 2**30  # the tests' tiny run


# -- item 6: accepted before ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (f"model.hidden_size={10**30}", "'model.hidden_size'"),
        (f"train.steps={10**30}", "'train.steps'"),
    ],
)
def test_huge_counts_are_refused_naming_their_range(isolated_cache, capsys, override, says):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", override])
    assert says in err and "out of range; accepted: 1 to " in err
    err = refused(capsys, ["run", QUICK, override, "--dry-run"])
    assert says in err


def test_steps_range_is_named_at_both_ends(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    for value in ("0", "100000001"):
        err = refused(capsys, ["validate", QUICK, "--set", f"train.steps={value}"])
        assert "accepted: 1 to 100,000,000" in err
    assert main(["validate", QUICK, "--set", "train.steps=100000000"]) == 0


def test_an_integer_beyond_64_bits_is_refused_where_no_limit_is_set(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", QUICK, "--set", f"data.max_train_per_lang={2**64}"])
    assert "'data.max_train_per_lang'" in err and "overflows 64-bit arithmetic" in err


@pytest.mark.parametrize("command", ["validate", "dry-run"])
def test_an_empty_relearn_eval_at_is_refused(isolated_cache, capsys, command):  # type: ignore[no-untyped-def]
    argv = (
        ["validate", NEW_TOKENS, "--set", "relearn.eval_at=[]"]
        if command == "validate"
        else ["run", NEW_TOKENS, "relearn.eval_at=[]", "--dry-run"]
    )
    err = refused(capsys, argv)
    assert "relearn.eval_at is empty" in err and "strictly between 0 and" in err


def test_relearn_eval_at_left_out_scores_the_midpoint():  # type: ignore[no-untyped-def]
    from polymnesia.experiments import load_config

    cfg = load_config(NEW_TOKENS, ["relearn.eval_at=null"])
    assert cfg.relearn.steps() == [0, 2, 4]
    assert load_config(NEW_TOKENS, []).relearn.steps() == [0, 2, 4]  # its eval_at: [2]


@pytest.mark.parametrize("offline", ["0", "1"])
def test_an_unknown_lm_eval_task_is_refused_by_the_dry_run(
    isolated_cache, capsys, monkeypatch, offline
):  # type: ignore[no-untyped-def]
    # online, the name is looked up in the installed lm-eval's task index (no download)
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, offline)
    override = "evaluate.harness.english=[no_such_task]"
    for argv in (
        ["run", TWO_PHASE, override, "--dry-run"],
        ["validate", TWO_PHASE, "--set", override],
    ):
        err = refused(capsys, argv)
        assert "lm-eval task(s) no_such_task" in err
        if offline == "0":
            assert "unknown lm-eval task(s) no_such_task" in err


def test_the_run_check_skips_a_model_known_only_after_its_download(monkeypatch):  # type: ignore[no-untyped-def]
    """A Hub id whose config is not in the Hub cache is left to the training loop's check:
    ``run``'s check never downloads (even with the Hub reachable) and never stops on it."""
    from types import SimpleNamespace

    import torch

    from polymnesia.errors import ConfigError
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments import planning as plan_cli
    from polymnesia.experiments.preflight import build_specs

    asked: list[bool] = []
    real = plan_cli.hub_shape

    def hub_shape(name: str, download: bool = True):  # type: ignore[no-untyped-def]
        asked.append(download)
        return real(name, download)

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(plan_cli, "hub_shape", hub_shape)
    state = SimpleNamespace(device=torch.device("cpu"), num_processes=1)
    cfg = load_config(QUICK, ["model.name_or_path=no-such-org/no-such-model-xyz"])
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, QUICK)
    plan_cli.check_memory(specs, {s.name for s in specs}, state, QUICK)
    assert asked == [False]
    cfg = load_config(QUICK, HUGE_MODEL)
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, QUICK)
    with pytest.raises(ConfigError, match="stage 'pretrain' needs about"):
        plan_cli.check_memory(specs, {s.name for s in specs}, state, QUICK)
    plan_cli.check_memory(specs, set(), state, QUICK)  # reused from the cache: not checked
