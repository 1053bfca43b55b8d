"""FSDP2 (train.engine: fsdp2): every training method on 2 gloo processes ends where one
process ends, frozen weights stay bit-identical, a sharded run resumes bit-identically,
and what FSDP2 cannot run is refused in one line before training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.training.config import TrainConfig

SCRIPT = str(Path(__file__).parent / "fsdp_cases.py")
#: 2 processes reduce gradients in another order than one process: float32 rounding, grown
#: over 6 AdamW steps at lr 1e-2. DDP on the same cases differs from one process by up to
#: 4.9e-6 (PCGrad, GradVac: their projections amplify rounding), FSDP2 by the same.
TOL = 1e-5
#: MGDA and LF-MLF: the language weights agree to 1e-6 at every step (tested below), but
#: AdamW at lr 1e-2 turns the last digits of near-zero gradients into whole steps of
#: +-lr: in one process, computing the Gram matrix in float64 instead of float32 alone
#: moves the final weights by 5e-6 (measured)
TOL_QP = 5e-5
COMBINERS = ["uniform", "pcgrad", "gradvac", "mgda", "lf_mlf", "lf_mlf_update"]


def _load(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "weights.safetensors"))


def _losses(folder: Path) -> list[float]:
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fsdp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("POLYMNESIA_ENGINE", None)
    launchers = {
        "one": ([sys.executable], "auto"),
        "fsdp2": (
            [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"],
            "fsdp2",
        ),
    }
    out = {}
    for name, (launcher, engine) in launchers.items():
        res = subprocess.run(
            [*launcher, SCRIPT, str(root / name), engine],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 0, res.stderr[-4000:]
        out[name] = root / name
    return out


CASES = [
    "plain",
    "tied",
    "eval_during_training",
    "checkpointing",
    "offload",
    "layer_freezing_random",
    "layer_freezing_spectrum",
    "frozen_rows",
    "active_forgetting",
    "early_stopping",
    "l2sp",
    "ewc",
    "lora",
    "uniform",
    "pcgrad",
    "gradvac",
    "mgda",
    "lf_mlf",
    "lf_mlf_update",
]


@pytest.mark.integration
@pytest.mark.parametrize("case", CASES)
def test_fsdp2_on_two_processes_ends_where_one_process_ends(
    runs: dict[str, Path], case: str
) -> None:
    one, two = runs["one"] / case, runs["fsdp2"] / case
    assert (two / "engine.txt").read_text().split()[0] == "fsdp2"
    assert (one / "engine.txt").read_text().split()[0] == "single"
    a, b = _load(one), _load(two)
    assert set(a) == set(b)
    tol = TOL_QP if case.startswith(("mgda", "lf_mlf")) else TOL
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=0, atol=tol), (k, (a[k] - b[k]).abs().max())
    assert _losses(one) == pytest.approx(_losses(two), rel=1e-6)


@pytest.mark.integration
@pytest.mark.parametrize("case", COMBINERS)
def test_fsdp2_combines_sharded_gradients_with_the_one_process_weights(
    runs: dict[str, Path], case: str
) -> None:
    """The Gram matrices are all-reduced from each process's shards: the same weights."""
    one = json.loads((runs["one"] / case / "combiner_weights.json").read_text())
    two = json.loads((runs["fsdp2"] / case / "combiner_weights.json").read_text())
    assert len(one) == len(two) == 6 and all(w is not None for w in one)
    for a, b in zip(one, two, strict=True):
        assert a == pytest.approx(b, abs=1e-6)


@pytest.mark.integration
def test_fsdp2_evaluation_inside_training_scores_every_text(runs: dict[str, Path]) -> None:
    lines = (runs["fsdp2"] / "eval_during_training" / "metrics.jsonl").read_text().splitlines()
    ref = (runs["one"] / "eval_during_training" / "metrics.jsonl").read_text().splitlines()
    got = [json.loads(x)["val_nll"] for x in lines if "val_nll" in x]
    want = [json.loads(x)["val_nll"] for x in ref if "val_nll" in x]
    assert len(got) == 3 and got == pytest.approx(want, rel=1e-5)


@pytest.mark.integration
def test_fsdp2_bf16_computes_in_bf16_and_tracks_the_autocast_losses(runs: dict[str, Path]) -> None:
    # FSDP2 casts the parameters to bf16 (MixedPrecisionPolicy); one process autocasts the
    # matrix products from float32 weights: not the same arithmetic, the same losses to 1e-3
    assert _losses(runs["one"] / "bf16") == pytest.approx(_losses(runs["fsdp2"] / "bf16"), rel=1e-3)


@pytest.mark.integration
def test_fsdp2_frozen_weights_stay_bit_identical(runs: dict[str, Path]) -> None:
    from fsdp_cases import tiny_model

    init = {k: v.detach().clone() for k, v in tiny_model().state_dict().items()}
    for case in ("layer_freezing_random", "layer_freezing_spectrum"):
        one, two = _load(runs["one"] / case), _load(runs["fsdp2"] / case)
        frozen = [k for k in init if torch.equal(one[k], init[k])]
        assert frozen, case  # the one-process run froze something
        for k in frozen:
            assert torch.equal(two[k], init[k]), (case, k)
    two = _load(runs["fsdp2"] / "frozen_rows")
    emb = two["model.embed_tokens.weight"]
    assert torch.equal(emb[:20], init["model.embed_tokens.weight"][:20])
    assert not torch.equal(emb[20:], init["model.embed_tokens.weight"][20:])


@pytest.mark.integration
def test_fsdp2_run_interrupted_after_a_checkpoint_resumes_bit_identically(
    runs: dict[str, Path],
) -> None:
    plain, resumed = _load(runs["fsdp2"] / "plain"), _load(runs["fsdp2"] / "resume")
    for k in plain:
        assert torch.equal(plain[k], resumed[k]), k
    assert _losses(runs["fsdp2"] / "plain") == _losses(runs["fsdp2"] / "resume")
    ckpt = next((runs["fsdp2"] / "resume" / "checkpoints").iterdir())
    manifest = json.loads((ckpt / "checkpoint.json").read_text())
    assert manifest["model_shards"] == 2
    assert {"model_rank0.safetensors", "optimizer_rank1.safetensors"} <= set(manifest["files"])
    assert not (ckpt / "model.safetensors").exists()  # no process ever held the whole model


@pytest.mark.integration
def test_fsdp2_run_killed_at_a_random_checkpoint_resumes_bit_identically(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """SIGKILL on both processes as checkpoint N is about to be written (N drawn from a
    seeded generator), then a new launch: the same weights and losses as the run that was
    never killed."""
    import random

    at = random.Random(1).choice([4, 6])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("POLYMNESIA_ENGINE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += [SCRIPT, str(tmp_path), "fsdp2", "killed"]
    killed = subprocess.run(
        cmd,
        env={**env, "FSDP_CASES_KILL_AT": str(at)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode != 0 and not (tmp_path / "killed" / "weights.safetensors").exists()
    steps = [p.name for p in (tmp_path / "killed" / "checkpoints").iterdir()]
    assert steps == [f"step_{at - 2:07d}"], steps  # the last checkpoint before the kill
    resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    plain, again = _load(runs["fsdp2"] / "plain"), _load(tmp_path / "killed")
    for k in plain:
        assert torch.equal(plain[k], again[k]), k
    assert _losses(runs["fsdp2"] / "plain") == _losses(tmp_path / "killed")


def test_engine_options_are_checked_when_read() -> None:
    assert TrainConfig(engine="fsdp2", fsdp2_offload=True).engine == "fsdp2"
    with pytest.raises(ValueError, match="fsdp2_offload needs engine"):
        TrainConfig(engine="ddp", fsdp2_offload=True)
    with pytest.raises(ValueError):
        TrainConfig(engine="deepspeed")


class _Acc:
    def __init__(self, kind: str) -> None:
        self.distributed_type = type("T", (), {"value": kind})()


def test_resolve_picks_the_engine_and_refuses_what_fsdp2_cannot_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polymnesia.training.engines import resolve

    monkeypatch.delenv("POLYMNESIA_ENGINE", raising=False)
    assert resolve(_Acc("NO"), TrainConfig()) == "single"
    assert resolve(_Acc("MULTI_CPU"), TrainConfig()) == "ddp"
    assert resolve(_Acc("MULTI_CPU"), TrainConfig(engine="fsdp2")) == "fsdp2"
    assert resolve(_Acc("NO"), TrainConfig(engine="fsdp2")) == "fsdp2"
    with pytest.raises(ConfigError, match="launched in Accelerate's fsdp mode"):
        resolve(_Acc("FSDP"), TrainConfig(engine="fsdp2"))
    with pytest.raises(ConfigError, match="bf16 or no"):
        resolve(_Acc("MULTI_GPU"), TrainConfig(engine="fsdp2", mixed_precision="fp16"))
    monkeypatch.setenv("POLYMNESIA_ENGINE", "fsdp2")
    assert resolve(_Acc("MULTI_CPU"), TrainConfig()) == "fsdp2"
    monkeypatch.setenv("POLYMNESIA_ENGINE", "zero3")
    with pytest.raises(ConfigError, match="accepted: auto, ddp, fsdp2"):
        resolve(_Acc("MULTI_CPU"), TrainConfig())


def test_methods_not_verified_under_fsdp2_are_refused_naming_it() -> None:
    from polymnesia.methods.active_forgetting import ActiveForgetting
    from polymnesia.testing import tiny_model
    from polymnesia.training.engines import check_engine
    from polymnesia.training.loop import standard_step
    from polymnesia.training.plugins import TrainingPlugin

    model = tiny_model("mistral", 50)

    class Unverified(TrainingPlugin):
        name = "unverified"

    with pytest.raises(ConfigError, match="'unverified' .* not verified under fsdp2"):
        check_engine("fsdp2", [Unverified()], standard_step, model, standard_step=standard_step)
    check_engine(
        "fsdp2",
        [ActiveForgetting(reset_every=2)],
        standard_step,
        model,
        standard_step=standard_step,
    )
    with pytest.raises(ConfigError, match="or with train.engine: fsdp2"):
        check_engine(
            "deepspeed",
            [ActiveForgetting(reset_every=2)],
            standard_step,
            model,
            standard_step=standard_step,
        )
