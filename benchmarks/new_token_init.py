"""New-token initialisations on the same base and data, with uncertainty (issue 26).

Run: ``python benchmarks/new_token_init.py [--pretrain-steps 300] [--adapt-steps 60]
[--eval-every 30] [--out results.json]`` and ``python benchmarks/new_token_init.py --speed``.

Quality (the default): two base models, the same tiny Mistral (``--preset``) pretrained on
the Bible in the pretraining languages with a byte-level BPE, one with standard pretraining
and one with active forgetting (embeddings re-drawn every ``--reset-every`` steps, paper
000). Each base's vocabulary is expanded for the adapting languages (paper 000's merge), the
new rows of the embeddings and of the kept head (``head: keep``) are initialised by each
registered initialisation, then only the new embedding rows and the head are trained
(``frozen_rows``) for ``--adapt-steps`` on the adapting languages. Bits per byte on each
adapting language's test verses at 0 steps (the initialisation alone) and every
``--eval-every`` steps; each number with its 95% percentile bootstrap interval over verses
(the language-group value averages the languages, stratified), and the paired bootstrap
difference against ``mean`` on the same verses. One seed: the intervals cover the test
sample, not training randomness. The defaults (a ``nano`` model, 300 + 60 steps) take
about 19 minutes on a loaded 2-core CPU; figures in docs/new_token_init.md.

Speed (``--speed``): each training-free initialisation of ``--new`` tokens from a
``--base``-token vocabulary (d = ``--dim``), with side data given (static embeddings and
alignments are computed once by the stage and cached with it), at three sizes.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from polymnesia.data.sources import get_source
from polymnesia.data.splits import assign_split
from polymnesia.evaluation.likelihood import lm_items
from polymnesia.methods.active_forgetting import ActiveForgetting
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.metrics.uncertainty import (
    paired_bootstrap,
    percentile_interval,
    ratio_statistic,
    resample_indices,
    stratified_bootstrap_ci,
)
from polymnesia.models import ModelConfig
from polymnesia.models.new_tokens import INITS, Alignment, NewTokens, StaticEmbeddings, initialise
from polymnesia.models.resize import new_ids, resize_and_init
from polymnesia.reports.curves import line_plot
from polymnesia.stages.adapt_vocabulary import (
    AdaptConfig,
    AdaptVocabularyParams,
    side_data,
    source_side_data,
)
from polymnesia.tokenizers.bpe import train_bpe
from polymnesia.tokenizers.encode import token_ids
from polymnesia.tokenizers.merge import merge_tokenizers
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData, pack_documents
from polymnesia.training.loop import train


def bible(langs: list[str], n_train: int, n_test: int) -> dict[str, tuple[list[Any], list[str]]]:
    """Per language: up to ``n_train`` train records and ``n_test`` test texts (aligned splits)."""
    src = get_source("bible")
    out = {}
    for lang in langs:
        recs = list(src.records(lang))
        tr = [r for r in recs if assign_split(r.id) == "train"][:n_train]
        te = [r.text for r in recs if assign_split(r.id) == "test"][:n_test]
        out[lang] = (tr, te)
    return out


def write_prepared(folder: Path, data: dict[str, tuple[list[Any], list[str]]]) -> None:
    for lang, (tr, _) in data.items():
        (folder / lang).mkdir(parents=True, exist_ok=True)
        with open(folder / lang / "train.jsonl", "w", encoding="utf-8") as f:
            for r in tr:
                rec = {"id": r.id, "lang": lang, "text": r.text, "label": None, "meta": {}}
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def blocks(tok: Any, texts: list[str], block: int) -> torch.Tensor:
    ids = token_ids(tok, texts)
    return pack_documents([[tok.bos_token_id, *x] for x in ids], block, tok.eos_token_id)


def model_for(tok: Any, preset: str, seed: int) -> torch.nn.Module:
    from transformers import MistralConfig, MistralForCausalLM

    dims: dict[str, Any] = dict(ModelConfig(preset=preset).dims())
    conf = MistralConfig(
        vocab_size=len(tok),
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        sliding_window=None,
        tie_word_embeddings=False,
        **dims,
    )
    torch.manual_seed(seed)
    return MistralForCausalLM(conf)


def bpb_items(model: torch.nn.Module, tok: Any, tests: dict[str, list[str]]) -> dict[str, Any]:
    model.eval()
    with torch.no_grad():
        out = {}
        for lang, texts in tests.items():
            _, items = lm_items(model, tok, texts, batch_size=32, max_length=256)
            out[lang] = {"nll": items["nll"], "bytes": items["bytes"]}
    model.train()
    return out


def stat(items: dict[str, Any], lang: str) -> Any:
    return ratio_statistic(items[lang]["nll"], items[lang]["bytes"], scale=1 / math.log(2))


def train_config(
    args: argparse.Namespace, steps: int, lr: float, eval_every: int | None = None
) -> TrainConfig:
    return TrainConfig(
        steps=steps,
        batch_size=args.batch,
        block_size=args.block,
        lr=lr,
        eval_every=eval_every,
        progress_bar=False,
        checkpoint_at_end=False,
        checkpoint_every=10**6,
    )


def quality(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    langs = [*args.pretraining, *args.adapting]
    data = bible(langs, args.train_texts, args.test_texts)
    tests = {lang: data[lang][1] for lang in args.adapting}
    base_texts = [r.text for lang in args.pretraining for r in data[lang][0]]
    new_texts = [r.text for lang in args.adapting for r in data[lang][0]]
    tok = train_bpe(base_texts, args.base_vocab)
    merged, report = merge_tokenizers(tok, train_bpe(new_texts, args.new_vocab))
    ids = new_ids(merged, report.first_new_id)
    print(f"base {len(tok)} tokens, merged {len(merged)} (+{report.added})", file=sys.stderr)
    results: dict[str, Any] = {"config": vars(args), "merge": report.as_dict(), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        write_prepared(tmp / "data", data)
        p = AdaptVocabularyParams(
            adapting=args.adapting, pretraining=args.pretraining, adapt=AdaptConfig()
        )
        t = time.perf_counter()
        static, _ = side_data("focus", tok, merged, tmp / "data", p)
        t_static = time.perf_counter() - t
        t = time.perf_counter()
        _, alignment = side_data("align", tok, merged, tmp / "data", p)
        t_align = time.perf_counter() - t
        t = time.perf_counter()
        source = source_side_data("wechsel", tok, tmp / "data", p)
        t_source = time.perf_counter() - t
        results["side_data_seconds"] = {
            "static": t_static,
            "alignment": t_align,
            "source_static": t_source,
        }
        pre = blocks(tok, base_texts, args.block)
        adapt_blocks = blocks(merged, new_texts, args.block)
        for base_name in args.bases:
            model = model_for(tok, args.preset, args.seed)
            plugins = [ActiveForgetting(reset_every=args.reset_every)] if base_name == "af" else []
            cfg = train_config(args, args.pretrain_steps, args.lr)
            t = time.perf_counter()
            model, _ = train(
                model,
                PackedLMData(pre),
                cfg,
                tmp / f"pre-{base_name}",
                seed=args.seed,
                plugins=plugins,
            )
            print(f"pretrained {base_name} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            for init in args.inits:
                m = copy.deepcopy(model)
                t = time.perf_counter()
                resize_and_init(
                    m,
                    merged,
                    tok,
                    report.first_new_id,
                    init,
                    head="keep",
                    seed=args.seed,
                    static=static,
                    alignment=alignment,
                    source_static=source,
                )
                t_init = time.perf_counter() - t
                curve = {0: bpb_items(m, merged, tests)}

                def evaluate(
                    model: torch.nn.Module, curve: dict[int, Any] = curve
                ) -> dict[str, float]:
                    step = max(curve) + args.eval_every
                    curve[step] = bpb_items(model, merged, tests)
                    return {}

                acfg = train_config(args, args.adapt_steps, args.adapt_lr, args.eval_every)
                plugin = FrozenRows(first_trainable_row=report.first_new_id)
                train(
                    m,
                    PackedLMData(adapt_blocks),
                    acfg,
                    tmp / f"adapt-{base_name}-{init}",
                    seed=args.seed,
                    plugins=[plugin],
                    eval_fn=evaluate,
                )
                results["runs"][f"{base_name}/{init}"] = {
                    "init_seconds": t_init,
                    "curve": {str(k): v for k, v in curve.items()},
                }
                g = stratified_bootstrap_ci([stat(curve[0], lang) for lang in args.adapting])
                print(f"{base_name}/{init}: bpb at 0 steps {g.estimate:.3f}", file=sys.stderr)
    results["new_tokens"] = len(ids)
    return results


def summarise(results: dict[str, Any]) -> str:
    """Markdown tables: one per step count, rows base/init, bpb per language and group."""
    cfg = results["config"]
    langs = cfg["adapting"]
    runs = results["runs"]
    steps = sorted({int(s) for r in runs.values() for s in r["curve"]})
    lines = []
    for step in steps:
        lines += [
            f"\n**{step} adaptation steps** (bits per byte, 95% bootstrap interval over "
            f"{cfg['test_texts']} test verses per language; Δ vs mean: paired bootstrap)\n",
            "| base | init | " + " | ".join(langs) + " | adapting group | Δ vs mean [95% CI] | p |",
            "|---|---|" + "---|" * len(langs) + "---|---|---|",
        ]
        for name, r in runs.items():
            base, init = name.split("/")
            items = r["curve"][str(step)]
            cells = []
            for lang in langs:
                ci = stratified_bootstrap_ci([stat(items, lang)])
                cells.append(f"{ci.estimate:.3f} [{ci.low:.3f}, {ci.high:.3f}]")
            strata = [stat(items, lang) for lang in langs]
            g = stratified_bootstrap_ci(strata)
            ref = runs[f"{base}/mean"]["curve"][str(step)]
            if init == "mean":
                diff = "—"
                p = "—"
            else:
                t = paired_bootstrap(strata, [stat(ref, lang) for lang in langs])
                diff = f"{t.effect:+.3f} [{t.low:+.3f}, {t.high:+.3f}]"
                p = f"{t.p_value:.3f}"
            lines.append(
                f"| {base} | {init} | "
                + " | ".join(cells)
                + f" | {g.estimate:.3f} [{g.low:.3f}, {g.high:.3f}] | {diff} | {p} |"
            )
    return "\n".join(lines)


def figures(results: dict[str, Any], folder: Path) -> list[Path]:
    """One figure per base: the adapting group's bpb against adaptation steps, a line per init."""
    langs = results["config"]["adapting"]
    runs = results["runs"]
    out = []
    for base in dict.fromkeys(name.split("/")[0] for name in runs):
        series = {}
        for name, r in runs.items():
            if name.startswith(base + "/"):
                steps = sorted(int(k) for k in r["curve"])
                ys = [
                    stratified_bootstrap_ci(
                        [stat(r["curve"][str(k)], lang) for lang in langs]
                    ).estimate
                    for k in steps
                ]
                series[name.split("/")[1]] = ([float(k) for k in steps], ys)
        out.append(
            line_plot(
                series,
                folder / f"bpb_{base}.png",
                xlabel="adaptation steps",
                ylabel="bits per byte (adapting languages)",
                title=f"new-token initialisations, {base} base",
            )
        )
    return out


def verdict(low: float, high: float, lower_is_claim: bool = True) -> str:
    """holds when the 95% interval of the effect lies on the claim's side of 0, contradicted
    when it lies on the other side, inconclusive when it straddles 0."""
    if (high < 0) == lower_is_claim and (high < 0 or low > 0):
        return "holds"
    if high < 0 or low > 0:
        return "contradicted"
    return "inconclusive"


def gap_change(
    runs: dict[str, Any], langs: list[str], step: str, init: str, n_resamples: int = 1000
) -> tuple[float, float, float]:
    """(standard - af) bpb under ``init`` minus the same under ``mean``: how active
    forgetting's advantage changes with the initialisation (negative: it shrinks). Paired
    bootstrap over verses, the same indices for the four arms, averaged over languages."""
    rng = np.random.default_rng(0)
    reps = np.zeros(n_resamples)
    point = 0.0
    for lang in langs:
        arms = {
            (b, i): stat(runs[f"{b}/{i}"]["curve"][step], lang)
            for b in ("standard", "af")
            for i in (init, "mean")
        }
        idx = resample_indices(rng, arms[("af", "mean")].n, n_resamples)
        r = {k: v.replicates(idx) for k, v in arms.items()}
        v = {k: a.value() for k, a in arms.items()}
        reps += (r[("standard", init)] - r[("af", init)]) - (
            r[("standard", "mean")] - r[("af", "mean")]
        )
        point += (v[("standard", init)] - v[("af", init)]) - (
            v[("standard", "mean")] - v[("af", "mean")]
        )
    lo, hi = percentile_interval(reps / len(langs))
    return point / len(langs), lo, hi


def claims(results: dict[str, Any]) -> str:
    langs = results["config"]["adapting"]
    runs = results["runs"]
    steps = sorted({int(s) for r in runs.values() for s in r["curve"]})
    last = str(steps[-1])
    lines = ["\n**Claims** (95% paired bootstrap intervals over test verses)\n"]
    for base in ("standard", "af"):
        for init in ("align", "focus"):
            if f"{base}/{init}" not in runs:
                continue
            t = paired_bootstrap(
                [stat(runs[f"{base}/{init}"]["curve"]["0"], lang) for lang in langs],
                [stat(runs[f"{base}/mean"]["curve"]["0"], lang) for lang in langs],
            )
            lines.append(
                f"- {init} beats mean at 0 steps ({base} base): **{verdict(t.low, t.high)}** (Δ "
                f"bpb {t.effect:+.3f} [{t.low:+.3f}, {t.high:+.3f}])"
            )
    if all(f"{b}/mean" in runs for b in ("standard", "af")):
        for step in ("0", last):
            t = paired_bootstrap(
                [stat(runs["standard/mean"]["curve"][step], lang) for lang in langs],
                [stat(runs["af/mean"]["curve"][step], lang) for lang in langs],
            )
            lines.append(
                f"- active forgetting beats standard pretraining with mean at {step} steps: "
                f"**{verdict(-t.high, -t.low)}** (standard - af {t.effect:+.3f} bpb "
                f"[{t.low:+.3f}, {t.high:+.3f}])"
            )
        for init in ("align", "focus", "omp"):
            if all(f"{b}/{init}" in runs for b in ("standard", "af")):
                d, lo, hi = gap_change(runs, langs, last, init)
                lines.append(
                    f"- active forgetting's advantage shrinks with {init} instead of mean ({last} "
                    f"steps): **{verdict(lo, hi)}** (change {d:+.3f} [{lo:+.3f}, {hi:+.3f}])"
                )
    return "\n".join(lines)


class StubTokenizer:
    """Stands in for tokenizers in ``--speed``: each new token splits into 1-4 base ids."""

    def __init__(self, n: int, n_base: int, total: int, seed: int = 0) -> None:
        self.n = n
        rng = np.random.default_rng(seed)
        self.pieces = {
            str(i): rng.integers(0, n_base, int(rng.integers(1, 5))).tolist() for i in range(total)
        }

    def __len__(self) -> int:
        return self.n

    def convert_ids_to_tokens(self, i: int) -> str:
        return str(i)

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return tokens[0]

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, Any]:
        return {"input_ids": [self.pieces[t] for t in texts]}


def speed(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    out: dict[str, Any] = {"config": vars(args), "seconds": {}}
    gen = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    for n_new in (args.new // 4, args.new // 2, args.new):
        n = args.base + n_new
        old = torch.randn((args.base, args.dim), generator=gen)
        base, merged = StubTokenizer(args.base, args.base, n), StubTokenizer(n, args.base, n)
        st = StaticEmbeddings(torch.randn((n, 64), generator=gen), torch.full((n,), 5), 1)
        links = 8 * n_new  # 8 aligned old tokens per new token
        counts = sp.csr_matrix(
            (
                rng.random(links),
                (rng.integers(args.base, n, links), rng.integers(0, args.base, links)),
            ),
            shape=(n, args.base),
        )
        src = StaticEmbeddings(
            torch.randn((args.base, 64), generator=gen), torch.full((args.base,), 5), 1
        )
        tokens = NewTokens(
            base, merged, args.base, tuple(range(args.base, n)), st, Alignment(counts), 0, src
        )
        for name in args.speed_inits:
            t, c = time.perf_counter(), time.process_time()
            initialise(name, old, tokens)
            sec, cpu = time.perf_counter() - t, time.process_time() - c
            out["seconds"].setdefault(name, {})[n_new] = {"wall": sec, "cpu": cpu}
            print(f"{name}: {n_new} new tokens in {sec:.2f} s ({cpu:.2f} s CPU)", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pretraining", nargs="+", default=["en", "es"])
    ap.add_argument("--adapting", nargs="+", default=["fr", "de"])
    ap.add_argument("--bases", nargs="+", default=["standard", "af"])
    ap.add_argument("--inits", nargs="+", default=INITS.names())
    ap.add_argument(
        "--speed-inits", nargs="+", default=INITS.names(), help="inits timed by --speed"
    )
    ap.add_argument("--preset", default="nano")
    ap.add_argument("--base-vocab", type=int, default=1000)
    ap.add_argument("--new-vocab", type=int, default=600)
    ap.add_argument("--train-texts", type=int, default=1500)
    ap.add_argument("--test-texts", type=int, default=80)
    ap.add_argument("--pretrain-steps", type=int, default=300)
    ap.add_argument("--adapt-steps", type=int, default=60)
    ap.add_argument("--eval-every", type=int, default=30)
    ap.add_argument("--reset-every", type=int, default=50)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--adapt-lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--new", type=int, default=16000)
    ap.add_argument("--base", type=int, default=32000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--summarise", type=Path, help="print the tables of a saved --out file")
    ap.add_argument("--figures", type=Path, help="folder for a bpb-against-steps figure per base")
    args = ap.parse_args()
    if args.summarise:
        saved = json.loads(args.summarise.read_text(encoding="utf-8"))
        print(summarise(saved))
        print(claims(saved))
        if args.figures:
            figures(saved, args.figures)
        return
    if "mean" not in args.inits:
        args.inits = ["mean", *args.inits]
    t = time.perf_counter()
    results = speed(args) if args.speed else quality(args)
    results["wall_seconds"] = time.perf_counter() - t
    results["machine"] = f"{platform.machine()} {platform.processor()}, torch {torch.__version__}"
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    if not args.speed:
        print(summarise(results))
        print(claims(results))
        if args.figures:
            figures(results, args.figures)
    else:
        print(json.dumps(results["seconds"], indent=1))


if __name__ == "__main__":
    main()
