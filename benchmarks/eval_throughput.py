"""Tokens/s of the per-language perplexity evaluation against training tokens/s, same model.

Training: polymnesia's loop on packed UDHR blocks (forward, backward, AdamW).
Evaluation: ``evaluation.likelihood.lm_stats`` over the UDHR paragraphs of six
languages (forward only, length-sorted batches, the model placed by the runtime
as the evaluation stages place it). Each side runs twice, alternating; the
better run counts. Both print model FLOPs utilisation against a measured
matmul peak. Goal: evaluation >= 3x training.

    python benchmarks/eval_throughput.py [--steps 30] [--batch 16] [--precision no|bf16|fp16]
        [--preset tiny] [--vocab 2000]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from _common import mfu_line, peak_flops, timed, tiny_model, udhr_blocks


def main() -> None:
    from polymnesia.data.sources import get_source
    from polymnesia.evaluation.likelihood import lm_stats
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
    t_train, t_eval = [], []
    for _ in range(2):  # alternate, keep each side's better run (the machine may be shared)
        with tempfile.TemporaryDirectory() as d:
            t_train.append(
                timed(lambda d=d, m=model: train(m, PackedLMData(blocks), cfg, Path(d), seed=0))
            )
        model = rt.place(model, stage="benchmark")  # evaluation as the stages run it
        stats = lm_stats(model, tok, texts, batch_size=64, max_length=256)  # warm-up
        t_eval.append(timed(lambda m=model: lm_stats(m, tok, texts, batch_size=64, max_length=256)))
        model.train()
    train_tps = a.steps * a.batch * 128 / min(t_train)
    eval_tps = (stats.tokens + len(texts)) / min(t_eval)  # scored tokens + BOS positions
    print(
        f"{rt.device.type}, torch threads: {torch.get_num_threads()}, preset {a.preset}, "
        f"precision {a.precision}; {len(texts)} texts, {stats.tokens} scored tokens"
    )
    print(f"training   : {train_tps:9.0f} tokens/s")
    print(f"evaluation : {eval_tps:9.0f} tokens/s")
    print(f"ratio evaluation / training = {eval_tps / train_tps:.2f}  (goal >= 3)")
    n, layers, width = model_shape(model)
    peak, what = peak_flops(rt.device, rt.dtype)
    print(what)
    print(mfu_line("training   ", train_tps, train_flops_per_token(n, layers, width, 128), peak))
    print(mfu_line("evaluation ", eval_tps, forward_flops_per_token(n, layers, width, 128), peak))


if __name__ == "__main__":
    main()
