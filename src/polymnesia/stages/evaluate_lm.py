"""Stages ``evaluate_lm`` (every metric registered for ``lm`` items per language on held-out
text: token perplexity, bits per byte, word perplexity; :func:`~polymnesia.metrics.base.
scored_metrics`) and ``pretraining_loss`` (the model's own pre-training loss: causal-LM loss of a
decoder, masked-LM loss of an encoder; Mao et al. 2022's L_p,
:mod:`polymnesia.evaluation.pretraining`).

A metric's interval is its registered rule resampled over the language's texts; its value the
all-reduced sums' ratio where :meth:`~polymnesia.evaluation.likelihood.LMStats.total` knows the
metric (the numbers this stage reported before it read the registry), else the rule's estimate.

Each score carries a percentile bootstrap interval over the texts of its
language (``ci_low``, ``ci_high``, ``n``); the per-text likelihoods are kept in
``items.jsonl`` (kind ``lm``) so reports can bootstrap group means and compare
arms text by text, and ``groups.jsonl`` holds the group means (and
``overall``) with their stratified intervals, as records with ``lang`` =
``mu_GROUP`` (not merged into the run's scores: tables average languages).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.evaluation.config import EvalConfig
from polymnesia.evaluation.inference import load_for_inference, place_for_inference
from polymnesia.evaluation.likelihood import LMStats, lm_items
from polymnesia.evaluation.pretraining import LOSS_METRIC, LOSS_UNIT, pretraining_loss_items
from polymnesia.items import (
    ITEMS_FILE,
    BootstrapConfig,
    ItemSet,
    group_intervals,
    interval_of,
    write_items,
)
from polymnesia.metrics.base import scored_metrics
from polymnesia.models.build import count_parameters, load_pretrained
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score, with_interval, write_scores
from polymnesia.runtime import Runtime
from polymnesia.stages.common import DATA, MODEL
from polymnesia.tokenizers.bpe import load_tokenizer


class EvaluateLMParams(StrictModel):
    label: str = Field(description="the model's name in tables (an arm: Baseline, BA, AFA)")
    size: str | None = None
    languages: dict[str, str] = Field(description="language -> group")
    eval: EvalConfig = Field(default_factory=EvalConfig)
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)


@STAGES.register(
    "evaluate_lm", "the lm metrics (perplexity, bits per byte, ...) per language and group"
)
class EvaluateLM(Stage[EvaluateLMParams]):
    category = "evaluation"
    version = "2"
    distributed = True
    inputs = (DATA, MODEL)
    outputs = (Artifact.ITEMS,)

    def load(self, ctx: StageContext[EvaluateLMParams]) -> tuple[Any, Any, Runtime]:
        p = ctx.params
        return load_for_inference(
            ctx.input(MODEL) / "model",
            stage="evaluate_lm",
            precision=p.eval.precision,
            sharded=True,
        )

    def score(
        self, model: Any, tokenizer: Any, texts: list[str], e: EvalConfig, rt: Runtime
    ) -> tuple[LMStats, dict[str, list[float]], list[str], dict[str, Any]]:
        """Statistics, per-text columns, the metrics to score and extra fields of one language:
        every metric registered for ``lm`` items."""
        st, cols = lm_items(
            model, tokenizer, texts, batch_size=e.batch_size, max_length=e.max_length, runtime=rt
        )
        return st, cols, scored_metrics("lm"), {}

    def run(self, ctx: StageContext[EvaluateLMParams]) -> list[Score]:
        p = ctx.params
        model, tokenizer, rt = self.load(ctx)
        n_params = count_parameters(model)
        scores: list[Score] = []
        sets: list[ItemSet] = []
        for lang, group in p.languages.items():
            e = p.eval
            texts = read_texts(ctx.input(DATA), lang, e.split, e.max_texts_per_lang)
            st, cols, metrics, more = self.score(model, tokenizer, texts, e, rt)
            extra = {"nll": st.nll, "tokens": st.tokens, "bytes": st.bytes, "texts": len(texts)}
            items = ItemSet(
                p.label, lang, "lm", list(range(len(texts))), cols, group=group, size=p.size
            )
            sets.append(items)
            scores += _language_scores(
                st,
                items,
                metrics,
                p.bootstrap,
                model=p.label,
                lang=lang,
                group=group,
                size=p.size,
                params=n_params,
                extra={**extra, **more},
            )
        if ctx.is_main_process:
            write_items(ctx.out_dir / ITEMS_FILE, sets)
            metrics = list(dict.fromkeys(s.metric for s in scores))
            write_scores(ctx.out_dir / "groups.jsonl", _group_scores(p, sets, n_params, metrics))
        return scores


@STAGES.register(
    "pretraining_loss",
    "the model's own pre-training loss per language: causal-LM (decoder) or masked-LM (encoder)",
)
class PretrainingLoss(EvaluateLM):
    """L_p(theta_p) of Mao et al. 2022's F_p (Section 3.1) for a loaded model: ``lm_loss`` (nats per
    token) of a decoder, ``mlm_loss`` (nats per masked token, fixed seeded masks:
    :mod:`polymnesia.evaluation.masked`) of an encoder, chosen by the model, so the reference
    and the fine-tuned arms (``finetune_task``) use the same loss."""

    version = "1"

    def load(self, ctx: StageContext[EvaluateLMParams]) -> tuple[Any, Any, Runtime]:
        p = ctx.params
        folder = ctx.input(MODEL) / "model"
        model, rt = place_for_inference(
            load_pretrained(folder),
            stage="pretraining_loss",
            precision=p.eval.precision,
            sharded=True,
        )
        return model, load_tokenizer(str(folder)), rt

    def score(
        self, model: Any, tokenizer: Any, texts: list[str], e: EvalConfig, rt: Runtime
    ) -> tuple[LMStats, dict[str, list[float]], list[str], dict[str, Any]]:
        objective, st, cols = pretraining_loss_items(
            model, tokenizer, texts, batch_size=e.batch_size, max_length=e.max_length, runtime=rt
        )
        more = {"objective": objective, "unit": LOSS_UNIT[objective]}
        return st, cols, [LOSS_METRIC[objective]], more


def _language_scores(
    st: LMStats, items: ItemSet, metrics: Sequence[str], cfg: BootstrapConfig, **fields: Any
) -> list[Score]:
    """One language's score of each metric, with its interval over the texts (``fields``: the
    records' model, lang, group, ...): its value the sums' ratio where :meth:`LMStats.total`
    knows the metric, else its registered rule's estimate. With no texts, the sums' numbers
    alone (no interval), and none for a metric they do not give."""
    out = []
    extra = fields.pop("extra", {})
    for metric in metrics:
        total = st.total(metric)
        if not items.n:
            if total is not None:
                out.append(Score(metric=metric, value=total, extra=dict(extra), **fields))
            continue
        iv = interval_of(items, metric, cfg)
        value = iv.estimate if total is None else total
        out.append(
            with_interval(Score(metric=metric, value=value, extra=dict(extra), **fields), iv)
        )
    return out


def _group_scores(
    p: EvaluateLMParams, sets: list[ItemSet], n_params: int, metrics: list[str]
) -> list[Score]:
    """Group means (unweighted over languages) with stratified bootstrap intervals."""
    groups: dict[str, list[str]] = {}
    for lang, group in p.languages.items():
        groups.setdefault(group, []).append(lang)
    nonempty = [s for s in sets if s.n]
    out = []
    for metric in metrics:
        for (_, _, group), iv in group_intervals(nonempty, metric, groups, p.bootstrap).items():
            langs = groups.get(group, [s.lang for s in nonempty])
            score = Score(
                model=p.label,
                lang=f"mu_{group}",
                metric=metric,
                value=iv.estimate,
                group=group,
                size=p.size,
                params=n_params,
                extra={"aggregate": "group_mean", "languages": langs},
            )
            out.append(with_interval(score, iv))
    return out
