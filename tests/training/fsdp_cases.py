"""Every training method on a tiny Mistral, for the FSDP2 equality tests (test_fsdp.py).

Run as ``python fsdp_cases.py OUT ENGINE CASE...`` in one process (engine ``auto``) or under
``torch.distributed.run --nproc_per_node 2`` (engine ``fsdp2``). With
``FSDP_CASES_KILL_AT=N`` every process is SIGKILLed as it is about to write checkpoint N
(case ``killed``: the plain case, killed, then launched again to resume; ``killed_eval``: the
same with the loop's evaluation every 2 steps, so every checkpoint follows an evaluation;
``killed_early_stopping``: with early stopping scoring the model before its checkpoints).
Each case trains from the same seed on the same data and global batch and leaves, in
``OUT/CASE/``, the trained weights (``weights.safetensors``, written by the first process)
and the loop's ``metrics.jsonl``. Case ``resume`` is interrupted after a checkpoint at a
seeded random step, then resumed by a second call in the same processes. With
``FSDP_CASES_NOISE=u`` each case runs as its rounding twin (:class:`Noise`). With
``FSDP_CASES_STOP_AT=N`` each case stops after step N (before its checkpoint) and leaves its
checkpoints for a later launch, on as many processes as it likes, to resume.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
import methods_helpers as helpers  # noqa: E402
from methods_helpers import random_data, train_cfg  # noqa: E402

from polymnesia.training.loop import train  # noqa: E402
from polymnesia.training.plugins import LoopState, TrainingPlugin  # noqa: E402

STEPS = 6
LANGS = ["en", "de", "fr"]


def tiny_model(tied: bool = False) -> torch.nn.Module:
    """A 3-block Mistral: three FSDP2 units and the root."""
    return helpers.tiny_model(tied, num_hidden_layers=3)


class Interrupt(TrainingPlugin):
    """Stops the run (as a kill would) once step ``at`` is done, before its checkpoint."""

    name = "interrupt"
    sharded_engines = ("fsdp2",)

    def __init__(self, at: int) -> None:
        self.at = at

    def after_optimizer_step(self, state: LoopState) -> None:
        if state.step == self.at:
            raise KeyboardInterrupt


class Weights(TrainingPlugin):
    """Records, at every step, the combiner's language weights and the inputs of the QP that
    chose them (``combiner_weights.json``: ``{"weights", "qp"}``, ``qp`` the Gram matrix P and
    linear term q given to :func:`polymnesia.gradients.qp.solve_simplex_qp`, or None for a
    combiner without a QP), so a test can bound the weights' difference between two runs by
    the QP's sensitivity to the difference of its inputs."""

    name = "weights"
    sharded_engines = ("fsdp2",)

    def __init__(self, step: Any) -> None:
        self.step, self.seen = step, []
        self.inputs: list[dict[str, Any]] = []
        _record_qp_inputs(self.inputs)

    def after_optimizer_step(self, state: LoopState) -> None:
        qp = self.inputs[-1] if self.inputs else None
        self.inputs.clear()
        self.seen.append({"weights": self.step.last_weights, "qp": qp})


class Noise(TrainingPlugin):
    """The rounding twin (``FSDP_CASES_NOISE=u``): before each optimizer step, adds to every
    gradient seeded noise of u times that tensor's RMS per element, as the float32 rounding
    of a sum in another order moves each element by a few ulps of its summands (not of
    itself: an element that cancels to near zero moves by far more than its own ulps). How
    far the trained weights then move measures their sensitivity to rounding, the tolerance
    the equality tests derive from."""

    name = "noise"
    sharded_engines = ("fsdp2",)

    def __init__(self, u: float) -> None:
        self.u, self.gen = u, torch.Generator().manual_seed(1234)

    def perturb(self, t: torch.Tensor) -> None:
        t.mul_(1 + self.u * torch.randn(t.shape, generator=self.gen).to(t))

    def before_optimizer_step(self, state: LoopState) -> None:
        for p in state.model.parameters():
            if p.grad is not None:
                self.perturb(p.grad)


class NoisyCombiner:
    """A combiner whose per-language gradient rows get :class:`Noise` before it combines them
    (the rounding the QP and the projections see); everything else is the wrapped one's."""

    def __init__(self, inner: Any, noise: Noise) -> None:
        self.__dict__.update(_inner=inner, _noise=noise)

    def __call__(self, grads: torch.Tensor, **kwargs: Any) -> Any:
        for row in grads:
            self._noise.perturb(row)
        return self._inner(grads, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)


def _record_qp_inputs(into: list[dict[str, Any]]) -> None:
    """Append the (P, q, has_b) of every simplex QP the combiners solve to ``into``."""
    from polymnesia.gradients import lf_mlf, mgda, qp

    real = qp.solve_simplex_qp

    def solve(p: Any, q: Any, b: Any = None, *args: Any, **kwargs: Any) -> Any:
        into.append({"p": p.tolist(), "q": q.tolist(), "b": b is not None})
        return real(p, q, b, *args, **kwargs)

    lf_mlf.solve_simplex_qp = solve  # type: ignore[assignment]
    mgda.solve_simplex_qp = solve  # type: ignore[assignment]


def _multilingual(combiner: str, **options: Any) -> dict[str, Any]:
    from polymnesia.gradients import get_combiner
    from polymnesia.training.multilingual_step import MultilingualData, MultilingualStep

    data = MultilingualData([random_data(n=16, seed=s) for s in range(len(LANGS))], LANGS, seed=0)
    step = MultilingualStep(get_combiner(combiner, **options), LANGS)
    weights = Weights(step)
    return {"data": data, "step_fn": step, "plugins": [step, weights], "weights": weights}


def _lora() -> dict[str, Any]:
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        tiny_model(), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    )
    return {"model": model, "cfg": {"lr": 1e-2}}


def _early_stopping() -> dict[str, Any]:
    from polymnesia.methods.early_stopping import EarlyStopping, EarlyStoppingConfig

    batch = random_data(n=4, seed=9).collate([0, 1, 2, 3])

    def score(model: torch.nn.Module) -> float:
        return -float(model(**batch).loss)

    es = EarlyStopping(EarlyStoppingConfig(max_epochs=3, patience=1), 2, score)
    return {"plugins": [es], "after": es.restore_best}


def _eval_during_training() -> dict[str, Any]:
    """The loop's evaluation every 2 steps: the likelihood scorer on an uneven number of
    texts (every process must make the same forward passes under FSDP2)."""
    from polymnesia.evaluation.likelihood import default_runtime, sequence_nll

    seqs = [list(range(3, 3 + n)) for n in (5, 9, 12, 7, 11)]

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        rt = default_runtime(model)  # as the likelihood scorers split texts over processes
        nll, count = sequence_nll(model, rt.shard(seqs), pad_id=0, batch_size=2)
        total = rt.sum([sum(nll), float(sum(count))])
        return {"val_nll": round(total[0] / total[1], 6)}

    return {"eval_fn": evaluate, "cfg": {"eval_every": 2}}


def _plugins(name: str, **options: Any) -> Callable[[], dict[str, Any]]:
    def make() -> dict[str, Any]:
        from polymnesia.training.plugins import PLUGINS

        return {"plugins": [PLUGINS.get(name)(**options)]}

    return make


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "plain": lambda: {"cfg": {"grad_accum": 2, "weight_decay": 0.1}},
    "tied": lambda: {"model": tiny_model(tied=True)},
    "eval_during_training": _eval_during_training,
    "checkpointing": lambda: {"cfg": {"gradient_checkpointing": True}},
    "bf16": lambda: {"cfg": {"mixed_precision": "bf16"}},
    "offload": lambda: {"cfg": {"fsdp2_offload": True}},
    "layer_freezing_random": _plugins(
        "layer_freezing", strategy="random", pct=50, by="layer", seed=1
    ),
    "layer_freezing_spectrum": _plugins("layer_freezing", strategy="spectrum", pct=50),
    "frozen_rows": lambda: {
        **_plugins("frozen_rows", first_trainable_row=20, freeze_body=False)(),
        "cfg": {"weight_decay": 0.1},
    },
    "active_forgetting": _plugins(
        "active_forgetting", reset_every=2, reset_head=True, replay_schedule=True
    ),
    "early_stopping": _early_stopping,
    "l2sp": _plugins("l2sp", alpha=0.5, anchor_head=True),
    "ewc": lambda: _plugins(  # a Fisher that differs by position: each shard must get its own
        "ewc",
        lam=2.0,
        fisher={
            n: (torch.arange(p.numel()) % 7 / 7).reshape(p.shape)
            for n, p in tiny_model().named_parameters()
        },
    )(),
    "lora": _lora,
    "uniform": lambda: _multilingual("uniform"),
    "pcgrad": lambda: _multilingual("pcgrad"),
    "gradvac": lambda: _multilingual("gradvac"),
    "mgda": lambda: _multilingual("mgda"),
    "lf_mlf": lambda: _multilingual("lf_mlf", on_infeasible="uniform"),
    "lf_mlf_update": lambda: _multilingual("lf_mlf", on_infeasible="uniform", accumulate="update"),
}


def kill_at_checkpoint(step: int) -> None:
    """SIGKILL this process as the loop is about to write checkpoint ``step`` (every process
    of the run reaches it), as tests/faults.py does for one process."""
    import signal

    from polymnesia.training import checkpoint

    real = checkpoint.save

    def save(acc: Any, ckpt_dir: Any, at: int, *args: Any, **kwargs: Any) -> None:
        if at == step:
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        real(acc, ckpt_dir, at, *args, **kwargs)

    checkpoint.save = save  # type: ignore[assignment]


def run_case(name: str, out: Path, engine: str) -> None:
    torch.manual_seed(0)
    base = {"resume": "plain", "killed": "plain", "killed_eval": "eval_during_training"}
    base["killed_early_stopping"] = "early_stopping"
    spec = CASES[base.get(name, name)]()
    model = spec.get("model") or tiny_model()
    data = spec.get("data") or random_data()
    kw = {"engine": engine, "checkpoint_every": 2, **spec.get("cfg", {})}
    if engine != "fsdp2":
        kw.pop("fsdp2_offload", None)
    cfg = train_cfg(STEPS, **kw)
    extra = {k: spec[k] for k in ("step_fn", "eval_fn") if k in spec}
    plugins = list(spec.get("plugins", []))
    if os.environ.get("FSDP_CASES_NOISE"):  # the rounding twin of this case
        noise = Noise(float(os.environ["FSDP_CASES_NOISE"]))
        if "step_fn" in spec:  # the language rows, before the combiner sees them
            spec["step_fn"].combiner = NoisyCombiner(spec["step_fn"].combiner, noise)
        else:
            plugins.append(noise)
    folder = out / name
    if name == "resume":  # stopped after a checkpoint at a seeded random step, then resumed
        at = random.Random(0).choice([3, 5])
        try:
            train(tiny_model(), data, cfg, folder, seed=0, plugins=[Interrupt(at)])
        except KeyboardInterrupt:
            pass
        else:
            raise SystemExit("the interrupted run was not interrupted")
    if os.environ.get("FSDP_CASES_STOP_AT"):  # stopped before checkpoint N, left to resume
        stop = Interrupt(int(os.environ["FSDP_CASES_STOP_AT"]))
        try:
            train(model, data, cfg, folder, seed=0, plugins=[*plugins, stop], **extra)
        except KeyboardInterrupt:
            return
        raise SystemExit("the interrupted run was not interrupted")
    model, result = train(model, data, cfg, folder, seed=0, plugins=plugins, **extra)
    if "after" in spec:
        spec["after"](model)
    if int(os.environ.get("RANK", "0")) == 0:
        from safetensors.torch import save_file

        weights = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        for k in weights:  # tied weights share storage, which safetensors refuses
            weights[k] = weights[k].clone()
        save_file(weights, str(folder / "weights.safetensors"))
        (folder / "engine.txt").write_text(f"{result.engine} {result.steps}\n")
        if "weights" in spec:
            (folder / "combiner_weights.json").write_text(json.dumps(spec["weights"].seen))


if __name__ == "__main__":
    out, engine, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if os.environ.get("FSDP_CASES_KILL_AT"):  # case "killed": a real kill, then a relaunch
        kill_at_checkpoint(int(os.environ["FSDP_CASES_KILL_AT"]))
    for name in names or [*CASES, "resume"]:  # the "killed" cases only when named
        run_case(name, out, engine)
    from polymnesia.runtime import shutdown

    shutdown()
