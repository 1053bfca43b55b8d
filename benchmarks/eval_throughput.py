"""Tokens/s of the per-language perplexity evaluation against training tokens/s, same model.

Training: polymnesia's loop on packed UDHR blocks (forward, backward, AdamW).
Evaluation: ``evaluation.likelihood.lm_stats`` over the UDHR paragraphs of six
languages (forward only, length-sorted batches, the model placed by the runtime
as the evaluation stages place it). The two sides alternate for ``--rounds``
rounds; each round gives one ratio (evaluation / training), and the script
prints the median ratio with its range over the rounds, and each side's median
tokens/s. Both print model FLOPs utilisation against a measured matmul peak.
The evaluation tokenizes its texts inside its timed window (as the stage does),
the training side's blocks are tokenized before; the ratio without the
evaluation's tokenization (timed separately) is printed as well.
Goal: evaluation >= 3x training.

    python benchmarks/eval_throughput.py [--rounds 5] [--steps 30] [--batch 16]
        [--precision no|bf16|fp16] [--preset tiny] [--vocab 2000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
from _common import mfu_line, peak_flops, timed, tiny_model, udhr_blocks


def main() -> None:
    from polymnesia.data.sources import get_source
    from polymnesia.evaluation.likelihood import encode_for_scoring, lm_stats
    from polymnesia.runtime import current
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.flops import (
        forward_flops_per_token,
        model_shape,
        train_flops_per_token,
    )
    from polymnesia.training.loop import train

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--precision", default="no", choices=["no", "bf16", "fp16"])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--vocab", type=int, default=2000)
    a = ap.parse_args()
    tok, blocks = udhr_blocks(128, a.vocab)
    model = tiny_model(len(tok), a.preset)
    cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch,
        block_size=128,
        log_every=10**6,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
        mixed_precision=a.precision,
    )
    src = get_source("udhr")
    texts = [r.text for lang in ("en", "ru", "ar", "zh", "hi", "es") for r in src.records(lang)]
    rt = current(a.precision)
    t_train, t_eval, t_encode = [], [], []
    for _ in range(a.rounds):  # alternate, so both sides see the same machine load
        with tempfile.TemporaryDirectory() as d:
            t_train.append(
                timed(lambda d=d, m=model: train(m, PackedLMData(blocks), cfg, Path(d), seed=0))
            )
        model = rt.place(model, stage="benchmark")  # evaluation as the stages run it
        stats = lm_stats(model, tok, texts, batch_size=64, max_length=256)  # warm-up
        t_eval.append(timed(lambda m=model: lm_stats(m, tok, texts, batch_size=64, max_length=256)))
        t_encode.append(timed(lambda: encode_for_scoring(tok, texts, 256)))
        model.train()
    train_runs = [a.steps * a.batch * 128 / t for t in t_train]
    eval_runs = [(stats.tokens + len(texts)) / t for t in t_eval]  # scored tokens + BOS positions
    ratios = [e / t for e, t in zip(eval_runs, train_runs, strict=True)]
    train_tps, eval_tps = statistics.median(train_runs), statistics.median(eval_runs)
    print(
        f"{rt.device.type}, torch threads: {torch.get_num_threads()}, preset {a.preset}, precision "
        f"{a.precision}; {len(texts)} texts, {stats.tokens} scored tokens; {a.rounds} rounds"
    )
    print(f"training   : {train_tps:9.0f} tokens/s median  (runs: {_runs(train_runs)})")
    print(f"evaluation : {eval_tps:9.0f} tokens/s median  (runs: {_runs(eval_runs)})")
    print(
        f"ratio evaluation / training = {statistics.median(ratios):.2f} median of {len(ratios)} "
        f"rounds, range {min(ratios):.2f}-{max(ratios):.2f}  (goal >= 3)"
    )
    # the training side's blocks are tokenized before its timed window; the evaluation
    # tokenizes its texts inside (as the stage does): without that share, for comparison
    scoring = [
        (stats.tokens + len(texts)) / (e - c) / t
        for e, c, t in zip(t_eval, t_encode, train_runs, strict=True)
    ]
    print(
        "  without the evaluation's tokenization "
        f"({100 * statistics.median(t_encode) / statistics.median(t_eval):.0f}% "
        f"of its time): ratio {statistics.median(scoring):.2f} median, range "
        f"{min(scoring):.2f}-{max(scoring):.2f}"
    )
    n, layers, width = model_shape(model)
    peak, what = peak_flops(rt.device, rt.dtype)
    print(what)
    print(mfu_line("training   ", train_tps, train_flops_per_token(n, layers, width, 128), peak))
    print(mfu_line("evaluation ", eval_tps, forward_flops_per_token(n, layers, width, 128), peak))


def _runs(values: list[float]) -> str:
    return ", ".join(f"{v:.0f}" for v in values)


if __name__ == "__main__":
    main()
