"""FSDP2 (train.engine: fsdp2): every training method on 2 gloo processes ends where one
process ends, frozen weights stay bit-identical, a sharded run resumes bit-identically,
and what FSDP2 cannot run is refused in one line before training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.training.config import TrainConfig

SCRIPT = str(Path(__file__).parent / "fsdp_cases.py")
#: 2 processes reduce gradients in another order than one process: float32 rounding. How
#: far 6 AdamW steps at lr 1e-2 carry it depends on the case, so each case's tolerance is
#: derived from its own sensitivity (:func:`tolerance`), measured on the machine that runs
#: the test by the case's rounding twin: the same run in one process with every gradient (or
#: every language's gradient, before the combiner) multiplied by 1 + u * N(0, 1) at each step,
#: u = 2^-20 (8 float32 ulps, about the relative change the QP inputs show between one and
#: two processes: 8.6e-7 measured). AdamW turns the last digits of near-zero gradients into
#: steps of up to +-lr, and the projections and QPs of PCGrad, GradVac, MGDA and LF-MLF
#: amplify them: the twins of those cases move by 1.6e-5 to 1.1e-4 (AMD EPYC), the others
#: by about one ulp.
TWIN_NOISE = 2.0**-20
#: the weights may differ by 4 times what the twin moved (one draw of the noise, not its
#: worst)...
TWIN_FACTOR = 4
#: ...and at least by what rounding does without any amplification: 16 float32 ulps of a
#: weight of magnitude up to 1 at each of the 6 steps (the forward pass rounds too, which
#: the twin does not perturb)
TOL_FLOOR = 16 * 6 * 2.0**-23


def tolerance(one: dict[str, torch.Tensor], twin: dict[str, torch.Tensor]) -> float:
    """The largest difference of a trained weight that rounding explains for this case."""
    moved = max(float((one[k] - twin[k]).abs().max()) for k in one)
    return max(TOL_FLOOR, TWIN_FACTOR * moved)


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
    launchers["twin"] = ([sys.executable], "auto")  # the rounding twin of every case
    out = {}
    for name, (launcher, engine) in launchers.items():
        noise = {"FSDP_CASES_NOISE": repr(TWIN_NOISE)} if name == "twin" else {}
        res = subprocess.run(
            [*launcher, SCRIPT, str(root / name), engine],
            env={**env, **noise},
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
    tol = tolerance(a, _load(runs["twin"] / case))
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=0, atol=tol), (k, (a[k] - b[k]).abs().max())
    # a loss is recorded to 6 decimals (2.5e-7 of a loss near 4) and computed from weights
    # within the tolerance above: 4 units of its last recorded digit
    assert _losses(one) == pytest.approx(_losses(two), rel=1e-6)


#: the gradients of one process and of two differ by float32 rounding only at step 1 (the
#: same parameters): a Gram entry g_i . g_j moves by at most about u ||g_i|| ||g_j||, with u
#: the relative error of a summed float32 gradient. 2^-16 (512 float32 ulps) bounds u with
#: room for a longer backward pass and another CPU's kernels (measured on an AMD EPYC: 8.6e-7)
STEP1_RELATIVE = 2.0**-16
#: PCGrad's and GradVac's weights are 1/T plus at most T - 1 projection coefficients
#: (g_i' . g_j) / ||g_j||^2 per language, explicit ratios of Gram entries with |coefficient|
#: <= 1 here: a relative Gram change rho moves each by at most about 2 rho (1 + 1), so a weight
#: by 4 (T - 1) rho. With rho <= 2^-16 at every one of these 6 steps (the measured QP inputs
#: move by 1.2e-6 at most, drift included) and T = 3 languages: 8 * 2^-16 (uniform: exact)
PROJECTION_TOL = 4 * (3 - 1) * STEP1_RELATIVE  # T = 3 (fsdp_cases.LANGS)


def _qp_weights(p: np.ndarray, q: np.ndarray, lf: bool) -> np.ndarray:
    from polymnesia.gradients.qp import solve_simplex_qp

    return solve_simplex_qp(p, q, p if lf else None).w


def _relative_change(p0: np.ndarray, q0: np.ndarray, p1: np.ndarray, q1: np.ndarray) -> float:
    """The largest change of a QP input in the units float32 rounding moves it: a Gram entry
    relative to ||g_i|| ||g_j||, a linear-term entry relative to the largest one."""
    scale = np.sqrt(np.outer(np.diag(p0), np.diag(p0)))
    dp = float(np.max(np.abs(p1 - p0) / np.where(scale > 0, scale, 1.0)))
    dq = float(np.max(np.abs(q1 - q0))) / max(float(np.max(np.abs(q0))), 1e-300)
    return max(dp, dq if np.any(q0) else 0.0)


def qp_sensitivity(p: np.ndarray, q: np.ndarray, lf: bool, draws: int = 16) -> float:
    """How far the QP's weights move per unit of relative input change (as
    :func:`_relative_change` measures it): the largest finite-difference ratio over seeded
    random perturbations of the Gram matrix (symmetric, entry (i, j) scaled by
    sqrt(P_ii P_jj)) and of q. An ill-conditioned Gram matrix (nearly parallel language
    gradients) or an active constraint set that changes makes it large."""
    rng = np.random.default_rng(0)
    base = _qp_weights(p, q, lf)
    scale = np.sqrt(np.outer(np.diag(p), np.diag(p)))
    eps, worst = 1e-7, 0.0
    for _ in range(draws):
        e = rng.uniform(-1, 1, p.shape)
        e = (e + e.T) / 2 * scale
        f = rng.uniform(-1, 1, q.shape) * float(np.max(np.abs(q)))
        moved = _qp_weights(p + eps * e, q + eps * f, lf)
        worst = max(worst, float(np.max(np.abs(moved - base))) / eps)
    return worst


@pytest.mark.integration
@pytest.mark.parametrize("case", COMBINERS)
def test_fsdp2_combines_sharded_gradients_with_the_one_process_weights(
    runs: dict[str, Path], case: str
) -> None:
    """The Gram matrices are all-reduced from each process's shards: the same weights, to
    what the QP's own conditioning makes of the rounding in its inputs.

    At every step the two runs' QP inputs differ by float32 rounding (at step 1) plus the
    drift of the parameters (later steps, bounded by the weight tests above). The weights may
    then differ by the QP's sensitivity times that input change (:func:`qp_sensitivity`,
    measured on this step's Gram matrix, times 4 for directions the random draws missed),
    plus 1e-9 for the solver. A fixed tolerance would fail wherever the QP is ill-conditioned
    (the LF-MLF QP turned a 1e-7 change of its inputs into 3.2e-6 on one CPU and less on
    another)."""
    one = json.loads((runs["one"] / case / "combiner_weights.json").read_text())
    two = json.loads((runs["fsdp2"] / case / "combiner_weights.json").read_text())
    assert len(one) == len(two) == 6 and all(s["weights"] is not None for s in one)
    lf = case.startswith("lf_mlf")
    for k, (a, b) in enumerate(zip(one, two, strict=True)):
        wa, wb = np.array(a["weights"]), np.array(b["weights"])
        if a["qp"] is None:  # uniform, PCGrad, GradVac: no QP
            assert b["qp"] is None and np.max(np.abs(wa - wb)) <= PROJECTION_TOL, (k, wa, wb)
            continue
        pa, qa = np.array(a["qp"]["p"]), np.array(a["qp"]["q"])
        pb, qb = np.array(b["qp"]["p"]), np.array(b["qp"]["q"])
        change = _relative_change(pa, qa, pb, qb)
        if k == 0:
            assert change <= STEP1_RELATIVE, change
        tol = 4 * qp_sensitivity(pa, qa, lf) * change + 1e-9
        assert np.max(np.abs(wa - wb)) <= tol, (k, wa, wb, tol)


@pytest.mark.integration
def test_fsdp2_evaluation_inside_training_scores_every_text(runs: dict[str, Path]) -> None:
    lines = (runs["fsdp2"] / "eval_during_training" / "metrics.jsonl").read_text().splitlines()
    ref = (runs["one"] / "eval_during_training" / "metrics.jsonl").read_text().splitlines()
    got = [json.loads(x)["val_nll"] for x in lines if "val_nll" in x]
    want = [json.loads(x)["val_nll"] for x in ref if "val_nll" in x]
    # a mean NLL recorded to 6 decimals, summed over processes in another order: each text's
    # float32 sum moves by a few ulps (1e-7), far inside 1e-5
    assert len(got) == 3 and got == pytest.approx(want, rel=1e-5)


@pytest.mark.integration
def test_fsdp2_bf16_computes_in_bf16_and_tracks_the_autocast_losses(runs: dict[str, Path]) -> None:
    # FSDP2 casts the parameters to bf16 (MixedPrecisionPolicy); one process autocasts the
    # matrix products from float32 weights: not the same arithmetic, the same losses to 1e-3
    # (a quarter of bf16's unit roundoff 2^-8, as the mean over 48 tokens averages rounding;
    # measured 1.3e-4)
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
    layout = manifest["shard_layout"]
    assert layout["model.embed_tokens.weight"]["placement"] == "shard0"
    from polymnesia.training import checkpoint

    assert checkpoint.problem(ckpt) == ""  # every shard has the shape its placement implies


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


@pytest.mark.integration
@pytest.mark.parametrize(
    ("case", "uninterrupted"),
    [("killed_eval", "eval_during_training"), ("killed_early_stopping", "early_stopping")],
)
def test_fsdp2_run_killed_after_an_evaluation_step_resumes_bit_identically(
    runs: dict[str, Path], tmp_path: Path, case: str, uninterrupted: str
) -> None:
    """The loop's evaluation (or early stopping's score) runs every 2 steps and the loop
    checkpoints every 2 steps, so each checkpoint is written right after a forward pass with
    no backward pass (which leaves FSDP2's root gathered). Both processes are SIGKILLed as
    checkpoint N is about to be written; the relaunch resumes from checkpoint N - 2 and ends
    where the run that was never killed ends, weights and losses and scores bit for bit.
    The other forward passes outside training (the Fisher, drift, similarity and replay
    stages) run on unsharded models outside the loop."""
    import random

    from polymnesia.training import checkpoint

    at = random.Random(2).choice([4, 6])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("POLYMNESIA_ENGINE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += [SCRIPT, str(tmp_path), "fsdp2", case]
    killed = subprocess.run(
        cmd, env={**env, "FSDP_CASES_KILL_AT": str(at)}, capture_output=True, text=True, timeout=600
    )
    assert killed.returncode != 0
    folder = tmp_path / case
    (ckpt,) = (folder / "checkpoints").iterdir()
    assert ckpt.name == f"step_{at - 2:07d}" and checkpoint.problem(ckpt) == ""
    resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "skipped" not in resumed.stderr  # the newest checkpoint was good: nothing fell back
    want, got = _load(runs["fsdp2"] / uninterrupted), _load(folder)
    for k in want:
        assert torch.equal(want[k], got[k]), k
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    ref = (runs["fsdp2"] / uninterrupted / "metrics.jsonl").read_text().splitlines()
    strip = [{k: v for k, v in json.loads(x).items() if k != "tokens_per_s"} for x in lines]
    ref_strip = [{k: v for k, v in json.loads(x).items() if k != "tokens_per_s"} for x in ref]
    assert strip == ref_strip


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
