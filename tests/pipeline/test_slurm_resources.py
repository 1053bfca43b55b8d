"""``--executor slurm`` sized by the memory planner (``cluster.gpu_memory_gb``): each training
stage's job asks for the fewest GPUs its plan fits on, and a job of several processes runs
its command under ``torchrun``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from polymnesia.cli.main import main
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.experiments.planning import stage_gpus, stage_plan
from polymnesia.experiments.preflight import build_specs
from polymnesia.jobs import first_host, torchrun_command
from polymnesia.pipeline.cluster import ClusterConfig
from polymnesia.pipeline.slurm import _parameters, job_shape

PAPER = "configs/two_phase_paper.yaml"
GIB = 2**30


@pytest.fixture(scope="module")
def paper_specs() -> list:  # type: ignore[type-arg]
    with pytest.MonkeyPatch.context() as mp:
        for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # (its lm-eval tasks: Hub's)
            mp.setenv(switch, "0")
        cfg = load_config(PAPER, [])
        return build_specs(EXPERIMENTS.get(cfg.experiment), cfg, PAPER)


def test_gpus_per_job_and_gpu_memory_are_one_or_the_other() -> None:
    with pytest.raises(ValidationError, match="either cluster.gpus_per_job"):
        ClusterConfig(gpus_per_job=2, gpu_memory_gb=80)
    assert ClusterConfig(gpu_memory_gb=80).gpus_per_node == 8


@pytest.mark.parametrize(
    ("gpus", "per_node", "shape"),
    [
        (0, 8, (1, 0)),
        (1, 8, (1, 1)),
        (8, 8, (1, 8)),
        (16, 8, (2, 8)),
        (8, 6, (2, 4)),
        (4, 3, (2, 2)),
    ],
)
def test_a_job_takes_as_few_nodes_as_hold_its_gpus(gpus: int, per_node: int, shape: tuple) -> None:  # type: ignore[type-arg]
    assert job_shape(gpus, ClusterConfig(gpu_memory_gb=80, gpus_per_node=per_node)) == shape


def test_sbatch_parameters_of_a_planned_job() -> None:
    sized = ClusterConfig(gpu_memory_gb=80, gpus_per_node=8, max_nodes=2)
    two_nodes = _parameters(sized, "p1", 16)
    assert (two_nodes["nodes"], two_nodes["gpus_per_node"], two_nodes["ntasks_per_node"]) == (
        2,
        8,
        1,
    )
    assert "gpus_per_node" not in _parameters(sized, "data", 0)  # a data stage: no GPU
    fixed = _parameters(ClusterConfig(gpus_per_job=2), "p1")
    assert fixed["gpus_per_node"] == 2 and "nodes" not in fixed


def test_the_planner_gives_each_stage_the_fewest_gpus_it_fits_on(paper_specs: list) -> None:  # type: ignore[type-arg]
    by_name = {s.name: s for s in paper_specs}
    names = set(by_name)
    at80 = stage_gpus(paper_specs, names, gpu_bytes=80 * GIB, gpus_per_node=8, max_nodes=1)
    at40 = stage_gpus(paper_specs, names, gpu_bytes=40 * GIB, gpus_per_node=8, max_nodes=1)
    assert at80["data"] == 0 and at80["eval_pretrain"] == 1
    trained = [n for n in names if stage_plan(by_name[n], by_name) is not None]
    assert trained and all(at80[n] >= 2 for n in trained)  # 7B with AdamW: not one GPU
    for n in trained:
        assert at40[n] >= at80[n]
        fits = stage_plan(by_name[n], by_name, devices=at80[n])
        assert fits.total <= 80 * GIB
        fewer = stage_plan(by_name[n], by_name, devices=at80[n] // 2)
        assert fewer.total > 80 * GIB  # the fewest: half as many do not fit
    only = stage_gpus(paper_specs, {"p1_alpaca"}, gpu_bytes=80 * GIB, gpus_per_node=8, max_nodes=1)
    assert list(only) == ["p1_alpaca"]  # reused stages are not sized


def test_a_stage_that_fits_no_job_is_one_line_with_what_would_fit(paper_specs: list) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError) as e:
        stage_gpus(paper_specs, {"p1_alpaca"}, gpu_bytes=8 * GIB, gpus_per_node=2, max_nodes=1)
    line = str(e.value)
    assert "\n" not in line and "fits on no job of up to 2 GPU(s) of 8 GiB" in line
    assert "it would fit with" in line


def test_the_dry_run_prints_the_sized_jobs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(switch, "0")
    # no sbatch here, the Hub's models and lm-eval tasks are not downloaded: what is checked
    # is the sizing, not the cluster or the Hub
    monkeypatch.setattr("polymnesia.pipeline.slurm.check_slurm", lambda cluster: None)
    monkeypatch.setattr("polymnesia.experiments.model_checks.check_hub_models", lambda *a: None)
    monkeypatch.setattr("polymnesia.experiments.preflight.check_harness_names", lambda s: None)
    args = ["run", PAPER, "--dry-run", "--executor", "slurm", "--run-dir", str(tmp_path / "r")]
    assert main([*args, "cluster.gpu_memory_gb=80"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("# slurm jobs sized"))
    assert "GPUs of 80 GiB: 1 GPU each, except (GPUs):" in line and "p1_alpaca 4" in line


def test_a_job_of_several_processes_runs_under_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [sys.executable, "-m", "polymnesia", "run", "c.yaml", "--stage", "p1"]
    monkeypatch.setenv("SLURM_JOB_ID", "123456")
    one = torchrun_command(argv, 4, 1)
    assert one[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc_per_node=4" in one and "--nnodes=1" in one
    assert "--master_port=23456" in one  # from the job id: two jobs on a node do not meet
    assert one[-6:] == ["-m", "polymnesia", "run", "c.yaml", "--stage", "p1"]
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu07")
    monkeypatch.setenv("SLURM_NODEID", "1")
    two = torchrun_command(argv, 8, 2)
    assert {"--nnodes=2", "--node_rank=1", "--master_addr=gpu07"} <= set(two)
    with pytest.raises(PolymnesiaError, match="runs `python -m polymnesia"):
        torchrun_command(["bash", "-c", "true"], 2, 1)
    with pytest.raises(PolymnesiaError, match="SLURM_JOB_NODELIST"):
        first_host("")


@pytest.mark.integration
def test_a_two_process_job_checks_its_processes_together(tmp_path: Path) -> None:
    """The job function itself, as a SLURM job of 2 processes on one node would run it: the
    self-check under torchrun sees 2 processes and sums across them."""
    code = (
        "import sys; from polymnesia.jobs import run_stage_job; "
        "run_stage_job([sys.executable, '-m', 'polymnesia', 'env', '--check', '--json'], 2)"
    )
    env = {**os.environ, "SLURM_JOB_ID": "4242", "OMP_NUM_THREADS": "1"}
    env["POLYMNESIA_CACHE"] = str(tmp_path)
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    first, _, rest = res.stdout.partition("\n")
    assert "job 4242" in first and "torch.distributed.run --nproc_per_node=2" in first
    report = json.loads(rest)
    assert report["runtime"]["processes"] == 2
    assert "over 2 processes" in report["check"]["results"][-1]["detail"]
