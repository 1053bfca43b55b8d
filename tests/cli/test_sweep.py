"""``polymnesia sweep``: the expansion into points, its bad inputs (one line each, before
anything runs), the joined stage graph and ``--dry-run`` (no stage runs here; the end-to-end
sweep is tests/integration/test_sweep_e2e.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.experiments import EXPERIMENTS
from polymnesia.experiments.preflight import build_specs
from polymnesia.experiments.sweep import expand, load_points, merge_plans
from polymnesia.pipeline.runner import plan

QUICKSTART = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("polymnesia: error: "), err
    assert "Traceback" not in err, err
    return err


def with_grid(tmp_path: Path, grid: str) -> str:
    path = tmp_path / "swept.yaml"
    path.write_text(Path(QUICKSTART).read_text(encoding="utf-8") + grid, encoding="utf-8")
    return str(path)


def test_the_points_are_the_cartesian_product_in_key_order() -> None:
    sweep = expand(QUICKSTART, ["train.lr=[1e-3,2e-3]", "seed=[0,1]", "train.steps=5"])
    assert sweep.fixed == ["train.steps=5"]
    assert [p.values for p in sweep.points] == [
        {"train.lr": 1e-3, "seed": 0},
        {"train.lr": 1e-3, "seed": 1},
        {"train.lr": 2e-3, "seed": 0},
        {"train.lr": 2e-3, "seed": 1},
    ]
    assert sweep.points[1].overrides == ["train.steps=5", "train.lr=0.001", "seed=1"]
    assert [p.label for p in sweep.points] == [
        "lr=0.001,seed=0",
        "lr=0.001,seed=1",
        "lr=0.002,seed=0",
        "lr=0.002,seed=1",
    ]
    cfgs = load_points(sweep)
    assert [(c.train.lr, c.seed, c.train.steps) for c in cfgs] == [
        (1e-3, 0, 5),
        (1e-3, 1, 5),
        (2e-3, 0, 5),
        (2e-3, 1, 5),
    ]
    assert sweep.notes == []


def test_a_list_valued_key_is_fixed_by_a_list_and_swept_by_a_list_of_lists() -> None:
    sweep = expand(QUICKSTART, ["groups.other=[de,vi]", "seeds=[[0],[0,1]]"])
    assert sweep.fixed == ["groups.other=[de,vi]"]
    assert [p.label for p in sweep.points] == ["seeds=0", "seeds=0+1"]
    assert [c.seeds for c in load_points(sweep)] == [[0], [0, 1]]
    assert [c.groups.other for c in load_points(sweep)] == [["de", "vi"]] * 2


def test_the_grid_section_and_the_command_line_that_narrows_it(tmp_path: Path) -> None:
    cfg = with_grid(tmp_path, "grid:\n  train.lr: [1.0e-3, 2.0e-3]\n  seed: [0, 1]\n")
    assert len(expand(cfg, []).points) == 4
    narrowed = expand(cfg, ["seed=[5]"])
    assert [p.values for p in narrowed.points] == [
        {"train.lr": 1e-3, "seed": 5},
        {"train.lr": 2e-3, "seed": 5},
    ]
    # a key with one value is not in the labels
    assert [p.label for p in narrowed.points] == ["lr=0.001", "lr=0.002"]


def test_run_refuses_a_config_with_a_grid_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = with_grid(tmp_path, "grid:\n  train.lr: [1.0e-3, 2.0e-3]\n")
    err = one_error_line(capsys, "run", cfg, "--dry-run")
    assert "has a 'grid:' section" in err and "polymnesia sweep" in err, err


def test_a_sweep_of_one_point_runs_with_a_note() -> None:
    sweep = expand(QUICKSTART, ["train.lr=[1e-3]"])
    assert len(sweep.points) == 1 and sweep.points[0].label == "lr=0.001"
    assert "one point" in sweep.notes[0] and "no comparison" in sweep.notes[0]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["train.stesp=[1,2]"],
            "sweep key 'train.stesp' is not a config key: unknown key 'train.stesp' "
            "(did you mean 'steps'?)",
        ),
        (["trian.steps=[1,2]"], "sweep key 'trian.steps' is not a config key"),
        (
            ["trian.steps=5", "train.lr=[1e-3,2e-3]"],
            "override 'trian.steps=5' is not a config key: unknown key 'trian'",
        ),
        (["train.lr=[]"], "sweep key 'train.lr' has no values"),
        (
            ["train.steps=[5,-1]"],
            "sweep point 2 (train.steps=-1): ",
        ),
        (["train.lr=[1e-3]", "train.lr=[2e-3]"], "sweep key 'train.lr' is given twice"),
        (["train.steps=5", "train.steps=[1,2]"], "sweep key 'train.steps' is given twice"),
        (["train.lr=[1e-3,0.001]"], "sweep key 'train.lr' lists the value 0.001 twice"),
        (
            ["train=[{steps: 1},{steps: 2}]", "train.lr=[1e-3,2e-3]"],
            "sweep keys 'train' and 'train.lr' overlap",
        ),
        (["train.steps=5"], "nothing to sweep in"),
        (["train.steps"], "sweep argument 'train.steps' must look like key.path=[a,b]"),
    ],
)
def test_bad_sweeps_are_one_line_before_anything_runs(
    argv: list[str], words: str, isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error_line(capsys, "sweep", QUICKSTART, *argv, "--out", str(isolated_cache / "out"))
    assert words in err, err
    assert not (isolated_cache / "out").exists() and not (isolated_cache / "stages").exists()


def test_a_failing_value_names_its_point_and_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error_line(capsys, "sweep", QUICKSTART, "train.steps=[5,-1]", "--dry-run")
    assert "sweep point 2 (train.steps=-1): " in err and "bad value for 'train.steps'" in err


@pytest.mark.parametrize(
    ("grid", "words"),
    [
        ("grid: [train.lr]\n", "'grid' must be a mapping of keys to lists of values"),
        ("grid:\n  train.lr: 0.001\n", "'grid.train.lr' must be a list of values"),
    ],
)
def test_a_malformed_grid_section_is_one_line(
    grid: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error_line(capsys, "sweep", with_grid(tmp_path, grid), "--dry-run")
    assert words in err, err


def test_a_fixed_override_of_a_key_of_the_grid_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = with_grid(tmp_path, "grid:\n  train.lr: [1.0e-3, 2.0e-3]\n")
    err = one_error_line(capsys, "sweep", cfg, "train.lr=0.1", "--dry-run")
    assert "override 'train.lr=0.1' sets a swept key (train.lr)" in err, err


def test_the_joined_graph_shares_what_the_swept_key_does_not_reach(
    isolated_cache: Path,
) -> None:
    sweep = expand(QUICKSTART, ["train.lr=[1e-3,2e-3]"])
    plans = []
    for cfg in load_points(sweep):
        plans.append(plan(build_specs(EXPERIMENTS.get(cfg.experiment), cfg, QUICKSTART)))
    merged = merge_plans(plans)
    names = [p.spec.name for p in merged.planned]
    assert names == [
        "data",
        "tokenizer",
        "pretrain.p1",
        "evaluate.p1",
        "pretrain.p2",
        "evaluate.p2",
    ]
    assert merged.shared() == ["data", "tokenizer"]
    by_name = {p.spec.name: p for p in merged.planned}
    assert by_name["pretrain.p2"].spec.inputs == {"data": "data", "tokenizer": "tokenizer"}
    assert by_name["evaluate.p2"].spec.inputs["model"] == "pretrain.p2"
    assert by_name["pretrain.p2"].entry == plans[1][2].entry  # the point's own cache entry
    assert merged.names[1] == {
        "data": "data",
        "tokenizer": "tokenizer",
        "pretrain": "pretrain.p2",
        "evaluate": "evaluate.p2",
    }
    assert merged.holder("evaluate.p2") == (1, "evaluate")
    assert merged.holder("tokenizer") == (0, "tokenizer")


def test_dry_run_prints_the_points_and_the_stages_to_build_and_reuse(
    isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep"
    argv = ["sweep", QUICKSTART, "train.lr=[1e-3,2e-3]", "--out", str(out), "--dry-run"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"#   1. {out / 'lr=0.001'}: train.lr=0.001 (4 stages, 4 not in the cache)" in text
    assert f"#   2. {out / 'lr=0.002'}: train.lr=0.002 (4 stages, 4 not in the cache)" in text
    assert (
        "# 6 distinct stages: 6 to build, 0 to reuse from the cache; 2 shared by several "
        "points (each built once): data, tokenizer"
    ) in text
    assert not out.exists() and not (isolated_cache / "stages").exists()


def test_an_out_folder_that_cannot_hold_the_runs_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    err = one_error_line(capsys, "sweep", QUICKSTART, "train.lr=[1e-3,2e-3]", "--out", str(afile))
    assert f"--out {afile} is a file" in err, err
    err = one_error_line(
        capsys, "sweep", QUICKSTART, "train.lr=[1e-3,2e-3]", "--out", "/proc/polymnesia-sweep"
    )
    assert "sweep point 1 (train.lr=0.001): " in err and "/proc" in err, err


def test_a_swept_cluster_key_is_refused_under_slurm(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error_line(
        capsys, "sweep", QUICKSTART, "cluster.partition=[a,b]", "--executor", "slurm", "--dry-run"
    )
    assert "fix cluster.* keys (key=value), do not sweep them" in err, err


def test_the_driver_refuses_to_run_under_torchrun(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    err = one_error_line(capsys, "sweep", QUICKSTART, "train.lr=[1e-3,2e-3]", "--dry-run")
    assert "polymnesia sweep runs in one process, not under torchrun" in err, err
