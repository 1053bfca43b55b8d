"""Benchmark the gradient combiners (a script, not a test).

Prints, measured side by side in one run:

1. the LF-MLF QP solve alone (Problem 2) at T = 10 and T = 50, quadprog and
   clarabel (goals: < 2 ms and < 20 ms);
2. each combiner's ``combine`` on a random [T, D] matrix (D ~ a tiny model)
   at T = 3 and T = 10, as a ratio of ``uniform``'s time;
3. a whole training step (per-language forward/backward of a tiny
   MistralForCausalLM, hidden 64, 2 layers, the combiner, the optimizer step)
   per combiner, as a ratio of the step with ``uniform`` (goals: <= 1.25x at
   T = 3, <= 1.6x at T = 10).

4. the same ratio on the real training loop (``polymnesia.training.loop.train``
   with :class:`~polymnesia.training.multilingual_step.MultilingualStep`) and
   the ``tiny`` preset as a 9-label sequence classifier (what ``lf_mlf`` runs),
   AdamW, clipping, the scheduler and the flat [T, D] buffers included.

Run: ``python benchmarks/combiners.py [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import torch

from polymnesia.gradients import (
    Combiner,
    assign_flat_grad,
    block_sizes,
    get_combiner,
    per_language_gradients,
)
from polymnesia.gradients.lf_mlf import lf_mlf_solve

NAMES = ["uniform", "pcgrad", "gradvac", "mgda", "lf_mlf"]


def median_ms(
    fns: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[str, float]:
    """Median wall time (ms) of each function, measured round-robin so that load
    from other processes affects every candidate alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(ts) for name, ts in times.items()}


def bench_qp(repeats: int) -> None:
    print("1. LF-MLF QP solve alone (median ms; goals T=10 < 2 ms, T=50 < 20 ms)")
    for t in (10, 50):
        times = qp_times(t, repeats)
        cells = [f"{s} {ms:7.3f} ms" for s, ms in times.items()]
        print(f"   T={t:3d}   " + "   ".join(cells))


def qp_times(t: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(t)
    grads = rng.normal(size=(t, 400))
    grads[: t // 2] -= 1.5 * rng.normal(size=400)
    gram, c = grads @ grads.T, grads @ (3 * rng.normal(size=400))
    fns = {s: partial(lf_mlf_solve, gram, c, s) for s in ("quadprog", "clarabel")}
    return median_ms(fns, repeats)


def tiny_mistral(vocab: int = 8000) -> torch.nn.Module:
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    return MistralForCausalLM(config)


def make_combiners(sizes: list[int]) -> dict[str, Combiner]:
    """Every combiner; GradVac per parameter tensor (its most expensive granularity)."""
    return {
        n: get_combiner(n, granularity="tensor", sizes=sizes) if n == "gradvac" else get_combiner(n)
        for n in NAMES
    }


def bench_combine(sizes: list[int], repeats: int) -> None:
    d = sum(sizes)
    print(f"2. combine() alone on random [T, D], D = {d:,} (median ms, ratio to uniform)")
    for t in (3, 10):
        grads = torch.randn(t, d, generator=torch.Generator().manual_seed(t))
        fns = {n: partial(c, grads) for n, c in make_combiners(sizes).items()}
        times = median_ms(fns, repeats)
        cells = [f"{n} {times[n]:7.2f} ms ({times[n] / times['uniform']:5.1f}x)" for n in NAMES]
        print(f"   T={t:2d}  " + "  ".join(cells))


def training_step(
    model: torch.nn.Module,
    data: dict[str, torch.Tensor],
    opt: torch.optim.Optimizer,
    combine: Combiner,
) -> None:
    """One LF-MLF-style step: per-language backward, combine, write back, optimizer step."""
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_fn(lang: str) -> torch.Tensor:
        return model(input_ids=data[lang], labels=data[lang]).loss

    grads = per_language_gradients(loss_fn, params, list(data))
    assign_flat_grad(params, combine(grads))
    opt.step()


def bench_steps(model: torch.nn.Module, repeats: int, batch: int, seq: int) -> None:
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    sizes = block_sizes(named, "tensor")
    goals = {3: 1.25, 10: 1.6}
    print(
        f"3. training step: tiny Mistral ({sum(sizes):,} params), batch {batch} x {seq} tokens per "
        "language (median ms, ratio to uniform's step)"
    )
    opt = torch.optim.SGD([p for _, p in named], lr=1e-6)  # tiny lr: the model barely moves
    for t in (3, 10):
        gen = torch.Generator().manual_seed(t)
        data = {f"l{i}": torch.randint(0, 8000, (batch, seq), generator=gen) for i in range(t)}
        fns = {
            n: partial(training_step, model, data, opt, c) for n, c in make_combiners(sizes).items()
        }
        times = median_ms(fns, repeats)
        cells = [f"{n} {times[n]:7.1f} ms ({times[n] / times['uniform']:4.2f}x)" for n in NAMES]
        worst = max(times[n] / times["uniform"] for n in NAMES)
        print(f"   T={t:2d}  " + "  ".join(cells) + f"   worst {worst:.2f}x, goal <= {goals[t]}x")


def tiny_classifier(vocab: int = 6000) -> torch.nn.Module:
    """The ``tiny`` preset (128 wide, 2 layers) as MistralForSequenceClassification, 9 labels."""
    from transformers import MistralConfig, MistralForSequenceClassification

    from polymnesia.models import PRESETS

    dims = PRESETS.get("tiny")
    config = MistralConfig(
        vocab_size=vocab,
        pad_token_id=3,
        max_position_embeddings=128,
        **{k: getattr(dims, k) for k in dims.__dataclass_fields__},
    )
    config.num_labels = 9
    torch.manual_seed(0)
    return MistralForSequenceClassification(config)


def loop_step_ms(name: str, t: int, steps: int, batch: int, seq: int) -> float:
    """Milliseconds per optimizer step of ``train`` with a per-language step (after 1 warm-up
    step).
    """
    import tempfile
    from pathlib import Path

    from polymnesia.tasks.classification import ClassificationData
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.loop import train
    from polymnesia.training.multilingual_step import MultilingualData, MultilingualStep
    from polymnesia.training.plugins import LoopState, TrainingPlugin

    gen = torch.Generator().manual_seed(t)
    sets = [
        ClassificationData(
            [
                {
                    "input_ids": torch.randint(4, 6000, (seq,), generator=gen).tolist(),
                    "labels": i % 9,
                }
                for i in range(64)
            ],
            pad_id=3,
        )
        for _ in range(t)
    ]
    langs = [f"l{i}" for i in range(t)]
    options: dict[str, Any] = {"granularity": "tensor"} if name == "gradvac" else {}
    model = tiny_classifier()
    if name == "gradvac":
        options["sizes"] = block_sizes(
            [(n, p) for n, p in model.named_parameters() if n.startswith("model.")], "tensor"
        )
    step = MultilingualStep(get_combiner(name, **options), langs)
    cfg = TrainConfig(
        steps=steps + 1,
        batch_size=batch,
        progress_bar=False,
        checkpoint_every=10_000,
        log_every=10_000,
    )
    with tempfile.TemporaryDirectory() as tmp:
        start = 0.0

        class _Clock(TrainingPlugin):  # starts the clock after the warm-up step
            def after_optimizer_step(self, state: LoopState) -> None:
                nonlocal start
                if state.step == 1:
                    start = time.perf_counter()

        train(
            model,
            MultilingualData(sets, langs),
            cfg,
            Path(tmp),
            step_fn=step,
            plugins=[step, _Clock()],
        )
        return 1000 * (time.perf_counter() - start) / steps


def bench_loop(steps: int, batch: int, seq: int) -> None:
    goals = {3: 1.25, 10: 1.6}
    print(
        f"4. real training loop, tiny preset classifier, {batch} x {seq} tokens per language, "
        f"{steps} steps (ms/step, ratio to uniform)"
    )
    for t in (3, 10):
        times = {n: loop_step_ms(n, t, steps, batch, seq) for n in NAMES}
        cells = [f"{n} {times[n]:7.1f} ms ({times[n] / times['uniform']:4.2f}x)" for n in NAMES]
        worst = max(times[n] / times["uniform"] for n in NAMES)
        print(f"   T={t:2d}  " + "  ".join(cells) + f"   worst {worst:.2f}x, goal <= {goals[t]}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 5 if args.quick else 15
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    bench_qp(repeats=20 if args.quick else 100)
    model = tiny_mistral()
    sizes = block_sizes([(n, p) for n, p in model.named_parameters()], "tensor")
    bench_combine(sizes, repeats)
    bench_steps(model, repeats=3 if args.quick else 7, batch=8, seq=64)
    bench_loop(steps=3 if args.quick else 10, batch=16, seq=48)


if __name__ == "__main__":
    main()
