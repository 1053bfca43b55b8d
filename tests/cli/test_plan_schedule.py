"""``polymnesia plan --schedule``: each stage's GPUs and estimated time on a cluster."""

from __future__ import annotations

import argparse

import pytest

from polymnesia.cli.main import main
from polymnesia.cli.plan import cluster_shape
from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.experiments.planning import stage_jobs, stage_plan
from polymnesia.experiments.preflight import build_specs
from polymnesia.training.flops import train_flops_per_token

QUICK = "configs/quickstart.yaml"
PAPER = "configs/two_phase_paper.yaml"


def test_a_training_stage_takes_its_model_flops_at_the_given_utilisation() -> None:
    cfg = load_config(QUICK, [])
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, QUICK)
    jobs = {
        j.name: j
        for j in stage_jobs(
            specs,
            gpus_per_node=8,
            max_gpus=8,
            memory=None,
            devices=1,
            engine=None,
            peak_flops=1e12,
            mfu=0.5,
            other_seconds=60,
        )
    }
    plan = stage_plan(specs[[s.name for s in specs].index("pretrain")], {s.name: s for s in specs})
    length = plan.setup.seq_len
    tokens = cfg.train.steps * cfg.train.batch_size * length
    fpt = train_flops_per_token(
        plan.shape.total_params, plan.shape.num_layers, plan.shape.hidden_size, length
    )
    assert jobs["pretrain"].seconds == pytest.approx(tokens * fpt / 0.5e12)
    assert jobs["pretrain"].gpus == 1 and jobs["pretrain"].needs == ("data", "tokenizer")
    assert jobs["data"].gpus == 0 and jobs["data"].seconds == 60  # a data stage: no GPU
    assert jobs["evaluate"].gpus == 1 and "pretrain" in jobs["evaluate"].needs


def test_two_phase_paper_on_four_nodes_of_eight(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for switch in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # (its lm-eval tasks are Hub's)
        monkeypatch.setenv(switch, "0")
    args = [PAPER, "seeds=[0,1,2]", "--memory", "80GB", "--schedule", "4x8"]
    assert main(["plan", *args]) == 0
    out = capsys.readouterr().out
    rows = out.split("# schedule on 4 node(s) x 8 GPU(s)")[1].splitlines()
    gpus = {r.split()[0]: int(r.split()[1]) for r in rows[2:] if not r.startswith("#")}
    assert gpus["data"] == 0 and gpus["p1_alpaca.seed2"] >= 2  # 7B with AdamW: not one GPU
    last = rows[-1]
    assert last.startswith("# the whole graph: ")
    ratio = float(last.rsplit(" ", 1)[1].rstrip("x"))
    assert 0 < ratio <= 0.35  # issue 43's goal for this config


def test_a_bad_cluster_shape_is_one_line() -> None:
    assert cluster_shape("4x8") == (4, 8) == cluster_shape(" 4 X 8 ")
    for bad in ("4", "0x8", "4x", "x8", "4*8"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not NODESxGPUS"):
            cluster_shape(bad)
