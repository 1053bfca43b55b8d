"""Tokens/s of the per-language perplexity evaluation against training tokens/s, same model.

Training: polymnesia's loop on packed UDHR blocks (forward, backward, AdamW).
Evaluation: ``evaluation.likelihood.lm_stats`` over the UDHR paragraphs of six
languages (forward only, length-sorted batches). Goal: evaluation >= 3x training.

    python benchmarks/eval_throughput.py [--steps 30] [--batch 16]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from _common import timed, tiny_model, udhr_blocks


def main() -> None:
    from polymnesia.data.sources import get_source
    from polymnesia.evaluation.likelihood import lm_stats
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.data import PackedLMData
    from polymnesia.training.loop import train

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    a = ap.parse_args()
    tok, blocks = udhr_blocks(128)
    model = tiny_model(len(tok))
    cfg = TrainConfig(
        steps=a.steps,
        batch_size=a.batch,
        block_size=128,
        log_every=10**6,
        checkpoint_every=10**6,
        checkpoint_at_end=False,
        progress_bar=False,
    )
    with tempfile.TemporaryDirectory() as d:
        t_train = timed(lambda: train(model, PackedLMData(blocks), cfg, Path(d), seed=0))
    train_tps = a.steps * a.batch * 128 / t_train
    src = get_source("udhr")
    texts = [r.text for lang in ("en", "ru", "ar", "zh", "hi", "es") for r in src.records(lang)]
    stats = lm_stats(model, tok, texts, batch_size=64, max_length=256)  # warm-up
    t_eval = timed(lambda: lm_stats(model, tok, texts, batch_size=64, max_length=256))
    eval_tps = (stats.tokens + len(texts)) / t_eval  # predicted tokens + BOS positions processed
    print(
        f"torch threads: {torch.get_num_threads()}; {len(texts)} texts, {stats.tokens} scored tokens"
    )
    print(f"training   : {train_tps:9.0f} tokens/s")
    print(f"evaluation : {eval_tps:9.0f} tokens/s")
    print(f"ratio evaluation / training = {eval_tps / train_tps:.2f}  (goal >= 3)")


if __name__ == "__main__":
    main()
