"""Seconds to fill one accuracy matrix R of T languages (paper 004), and where they go.

Runs the lifelong step's own pieces: for each of T languages, the training
loop with the early-stopping plugin (validation each epoch) on that
language's examples, then one batched evaluation of all T test sets (a row of
R). Text is the packaged UDHR (real text in T languages, BPE trained on it);
the label of a paragraph is its length bucket (a real but trivial task:
throughput does not depend on it). Reports total seconds, the share spent in
evaluation (test rows + validation), and evaluation vs training examples/s.
Goal (issue 5): evaluation at least 3x faster per example than training.

    python benchmarks/transfer_matrix.py --languages 16 --train 64 --eval 32 --epochs 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

LANGS = [
    "en",
    "fr",
    "de",
    "es",
    "pt",
    "pl",
    "tr",
    "id",
    "vi",
    "sw",
    "ru",
    "uk",
    "ar",
    "zh",
    "hi",
    "ja",
    "ko",
    "it",
    "nl",
    "sv",
    "fi",
    "hu",
    "cs",
    "el",
]


def examples(tok, lang: str, n: int, offset: int, max_length: int) -> list[dict]:  # type: ignore[no-untyped-def]
    from polymnesia.data.sources import get_source
    from polymnesia.tasks.classification import build_sequence_examples

    recs = [r for r in get_source("udhr").records(lang)]
    recs = (recs * (1 + (n + offset) // max(1, len(recs))))[offset : offset + n]
    rows = [
        {"id": f"{lang}{i}", "lang": lang, "text": r.text, "label": min(8, len(r.text) // 60)}
        for i, r in enumerate(recs)
    ]
    return build_sequence_examples(rows, tok, max_length)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--languages", type=int, default=16)
    ap.add_argument("--train", type=int, default=64, help="training examples per language")
    ap.add_argument(
        "--eval", type=int, default=32, help="test (and validation) examples per language"
    )
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--eval-batch", type=int, default=128)
    args = ap.parse_args()
    from transformers import MistralConfig, MistralForSequenceClassification

    from polymnesia.data.sources import get_source
    from polymnesia.methods.early_stopping import EarlyStopping, EarlyStoppingConfig
    from polymnesia.tasks.classification import ClassificationData, evaluate_by_language
    from polymnesia.tokenizers.bpe import train_bpe
    from polymnesia.training.config import TrainConfig
    from polymnesia.training.loop import train

    langs = LANGS[: args.languages]
    src = get_source("udhr")
    tok = train_bpe([r.text for lang in langs for r in src.records(lang)], 4000)
    data = {
        lang: (
            examples(tok, lang, args.train, 0, 48),
            examples(tok, lang, args.eval, args.train, 48),
        )
        for lang in langs
    }
    test = {lang: v[1] for lang, v in data.items()}
    torch.manual_seed(0)
    cfg = MistralConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_labels=9,
        pad_token_id=tok.pad_token_id or 0,
    )  # type: ignore[call-arg]
    model: torch.nn.Module = MistralForSequenceClassification(cfg)
    pad = int(tok.pad_token_id or 0)
    t_train = t_val = t_eval = 0.0
    n_train = n_eval = 0
    start = time.time()
    for lang in langs:
        tr, val = data[lang]
        spe = max(1, len(tr) // args.batch)
        val_s = [0.0]

        def score(m: torch.nn.Module, val=val, val_s=val_s) -> float:  # type: ignore[no-untyped-def]
            t = time.time()
            s = evaluate_by_language(m, {"v": val}, metric="macro_f1", batch_size=args.eval_batch)[
                "v"
            ]
            val_s[0] += time.time() - t
            return s

        stop = EarlyStopping(
            EarlyStoppingConfig(max_epochs=args.epochs, patience=args.epochs - 1), spe, score
        )
        tc = TrainConfig(
            steps=spe * args.epochs,
            batch_size=args.batch,
            lr=1e-3,
            warmup_ratio=0.0,
            min_lr_ratio=1.0,
            checkpoint_every=10**9,
            log_every=10**9,
            progress_bar=False,
        )
        t = time.time()
        with tempfile.TemporaryDirectory() as d:
            model, res = train(model, ClassificationData(tr, pad), tc, Path(d), plugins=[stop])
        t_train += time.time() - t - val_s[0]
        t_val += val_s[0]
        n_train += res.steps * args.batch
        t = time.time()
        evaluate_by_language(model, test, metric="macro_f1", batch_size=args.eval_batch)
        t_eval += time.time() - t
        n_eval += sum(len(v) for v in test.values())
    total = time.time() - start
    tr_rate, ev_rate = n_train / t_train, n_eval / t_eval
    print(f"T = {len(langs)}: R filled in {total:.1f} s (threads {torch.get_num_threads()})")
    print(
        f"  evaluation share: test rows {100 * t_eval / total:.1f}% + validation "
        f"{100 * t_val / total:.1f}%"
    )
    print(
        f"  training: {n_train} examples in {t_train:.1f} s = {tr_rate:.0f} ex/s "
        "(forward+backward+step)"
    )
    print(
        f"  evaluation: {n_eval} examples in {t_eval:.1f} s = {ev_rate:.0f} ex/s (batched, no grad)"
    )
    print(f"  evaluation / training throughput: {ev_rate / tr_rate:.1f}x (goal >= 3x)")


if __name__ == "__main__":
    main()
