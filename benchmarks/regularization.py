"""Step time of the forgetting baselines against plain training (issue 27's speed goals).

Same tiny Mistral (``tiny`` preset), same packed UDHR blocks, same global batch and
optimizer; the arms alternate for ``--rounds`` rounds. Each arm's figure is its median step
time after step ``--skip`` (timed by a loop plugin: setup and warm-up left out; ``--stat
min``: its fastest step, the figure least moved by other processes on a loaded machine), and
the script prints each baseline's median ratio to plain training over the rounds:

* ``l2sp``: the exact gradient of alpha/2 ||theta - theta_0||^2 added per step;
* ``ewc``: the same with a Fisher weight per entry (a random Fisher);
* ``distill``: the frozen starting model's forward pass per micro-batch, its final hidden
  states giving the KL a chunk of positions at a time beside the chunked loss;
* ``distill_logits``: the same term from full ``(B, L, V)`` logits and the model's own loss
  (the path distillation took before the chunked KL, and still takes where the loss is not
  chunked: ``train.chunked_loss: false`` or an architecture without a chunked head).

Goals: l2sp and ewc <= 1.15x plain; distill at most one extra forward pass of the previous
model. Each round also times one no-grad forward pass of the model on a step's batch (the
teacher's share of a distillation step) and prints each distillation arm's extra time per
step in such forward passes: ``(distill - plain) / forward``.

    python benchmarks/regularization.py [--rounds 3] [--steps 30] [--skip 5] [--batch 8]
        [--block 128] [--preset tiny] [--vocab 2000] [--arms plain,distill,...]
        [--stat median|min]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _common import tiny_model, udhr_blocks

from polymnesia.methods.regularization import EWC, L2SP, Distill, TeacherKL
from polymnesia.penalties.distillation import distillation_rows
from polymnesia.runtime import logit_chunk_rows
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.loop import train
from polymnesia.training.plugins import LoopState, TrainingPlugin

ARMS = ("plain", "l2sp", "ewc", "distill", "distill_logits")
DISTILL = ("distill", "distill_logits")
#: an arm's figure in a round, from its step times after ``--skip``
STATS = {"median": statistics.median, "min": min}


class Stamps(TrainingPlugin):
    name = "stamps"

    def __init__(self) -> None:
        self.t: list[float] = []

    def after_optimizer_step(self, state: LoopState) -> None:
        self.t.append(time.perf_counter())


class LogitsDistill(Distill):
    """``distill`` with its term made from the full logits (``loss_term``), the loss unchunked."""

    def param_groups(self, model: torch.nn.Module, groups: list[dict[str, Any]]) -> Any:
        groups = super().param_groups(model, groups)
        self.chunked_term = False
        return groups


def step_time(arm: str, blocks: torch.Tensor, a: argparse.Namespace) -> float:
    model = tiny_model(a.vocab, a.preset)
    plugins: list[TrainingPlugin] = []
    if arm == "l2sp":
        plugins = [L2SP(alpha=0.01)]
    elif arm == "ewc":
        g = torch.Generator().manual_seed(0)
        fisher = {n: torch.rand(p.shape, generator=g) for n, p in model.named_parameters()}
        plugins = [EWC(lam=100.0, fisher=fisher)]
    elif arm in DISTILL:
        kind = Distill if arm == "distill" else LogitsDistill
        plugins = [kind(weight=1.0, temperature=2.0)]
    stamps = Stamps()
    cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch,
        block_size=a.block,
        lr=1e-3,
        warmup_ratio=0.0,
        log_every=a.steps,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
    )
    with tempfile.TemporaryDirectory() as out:
        train(model, PackedLMData(blocks), cfg, Path(out), plugins=[*plugins, stamps])
    t = stamps.t
    return STATS[a.stat]([b - c for c, b in zip(t[a.skip - 1 : -1], t[a.skip :], strict=True)])


def forward_time(blocks: torch.Tensor, a: argparse.Namespace) -> float:
    """Median time of one no-grad forward pass over a step's batch (logits included)."""
    model = tiny_model(a.vocab, a.preset).eval()
    g = torch.Generator().manual_seed(0)
    times = []
    with torch.no_grad():
        for _ in range(a.steps):
            rows = torch.randint(len(blocks), (a.batch,), generator=g)
            t0 = time.perf_counter()
            model(input_ids=blocks[rows]).logits.float()
            times.append(time.perf_counter() - t0)
    return STATS[a.stat](times[a.skip :])


def kl_time(blocks: torch.Tensor, a: argparse.Namespace) -> float:
    """Time of the KL's own arithmetic in one chunked distillation step: the KL rows and their
    gradient (:func:`distillation_rows`) over a step's positions, in the chunks the loss makes,
    and their gradient added to the cross-entropy's; the logits are made beforehand (their
    products are the teacher's forward pass and the student's loss, timed elsewhere)."""
    student, teacher = tiny_model(a.vocab, a.preset, seed=0), tiny_model(a.vocab, a.preset, seed=1)
    rows = logit_chunk_rows(a.vocab * (1 + TeacherKL.buffers), torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    times = []
    with torch.no_grad():
        for _ in range(a.steps):
            ids = blocks[torch.randint(len(blocks), (a.batch,), generator=g)]
            z = student(input_ids=ids).logits.float().flatten(0, 1)
            y = teacher(input_ids=ids).logits.float().flatten(0, 1)
            scale = torch.tensor(1.0 / len(z))
            t0 = time.perf_counter()
            for start in range(0, len(z), rows):
                ce_grad = torch.empty_like(z[start : start + rows])
                _, kd_grad = distillation_rows(
                    z[start : start + rows], y[start : start + rows], 2.0, scale
                )
                ce_grad += kd_grad
            times.append(time.perf_counter() - t0)
    return STATS[a.stat](times[a.skip :])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--vocab", type=int, default=2000)
    ap.add_argument(
        "--stat",
        choices=sorted(STATS),
        default="median",
        help="an arm's figure per round: its median step, or its fastest (on a loaded "
        "machine other processes only add to step times; the fastest is nearest the step's "
        "own cost)",
    )
    ap.add_argument(
        "--arms", default=",".join(ARMS), help=f"comma-separated, plain first: {', '.join(ARMS)}"
    )
    a = ap.parse_args()
    arms = a.arms.split(",")
    if arms[0] != "plain" or not set(arms) <= set(ARMS):
        raise SystemExit(f"--arms: plain first, then any of {', '.join(ARMS[1:])}; got {a.arms}")
    _, blocks = udhr_blocks(a.block, a.vocab)
    ratios: dict[str, list[float]] = {arm: [] for arm in arms[1:]}
    extra: dict[str, list[float]] = {arm: [] for arm in arms if arm in DISTILL}
    extra_kl: list[float] = []
    for r in range(a.rounds):
        times = {arm: step_time(arm, blocks, a) for arm in arms}
        times["forward"] = forward_time(blocks, a)
        if "distill" in arms:
            times["kl"] = kl_time(blocks, a)
            extra_kl.append(times["kl"] / times["forward"])
        for arm in arms[1:]:
            ratios[arm].append(times[arm] / times["plain"])
        for arm, xs in extra.items():
            xs.append((times[arm] - times["plain"]) / times["forward"])
        print(f"round {r}: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in times.items()))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(
        f"{a.preset} preset, {device}, batch {a.batch} x {a.block} tokens, {a.rounds} rounds, "
        f"{a.stat} step"
    )
    for arm, rs in ratios.items():
        print(f"{arm}: {statistics.median(rs):.3f}x plain (range {min(rs):.3f}-{max(rs):.3f})")
    for arm, xs in extra.items():
        print(
            f"{arm}'s extra time per step: {statistics.median(xs):.2f} forward passes "
            f"(range {min(xs):.2f}-{max(xs):.2f})"
        )
    if extra_kl:
        print(
            f"of distill's, the KL's arithmetic (no products): {statistics.median(extra_kl):.2f} "
            f"forward passes (range {min(extra_kl):.2f}-{max(extra_kl):.2f})"
        )


if __name__ == "__main__":
    main()
