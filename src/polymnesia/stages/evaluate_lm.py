"""Stage ``evaluate_lm``: perplexity and bits per byte per language on held-out text.

Each score carries a percentile bootstrap interval over the texts of its
language (``ci_low``, ``ci_high``, ``n``); the per-text likelihoods are kept in
``items.jsonl`` (kind ``lm``) so reports can bootstrap group means and compare
arms text by text, and ``groups.jsonl`` holds the group means (and
``overall``) with their stratified intervals, as records with ``lang`` =
``mu_GROUP`` (not merged into the run's scores: tables average languages).
"""

from __future__ import annotations

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.evaluation.config import EvalConfig
from polymnesia.evaluation.inference import load_for_inference
from polymnesia.evaluation.likelihood import lm_items
from polymnesia.items import (
    ITEMS_FILE,
    BootstrapConfig,
    ItemSet,
    group_intervals,
    interval_of,
    write_items,
)
from polymnesia.models import count_parameters
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score, with_interval, write_scores

METRICS = ("perplexity", "bits_per_byte")


class EvaluateLMParams(StrictModel):
    label: str = Field(description="the model's name in tables (an arm: Baseline, BA, AFA)")
    size: str | None = None
    languages: dict[str, str] = Field(description="language -> group")
    eval: EvalConfig = Field(default_factory=EvalConfig)
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)


@STAGES.register("evaluate_lm", "token perplexity and bits per byte per language and group")
class EvaluateLM(Stage):
    version = "2"
    distributed = True

    def run(self, ctx: StageContext) -> list[Score]:
        p: EvaluateLMParams = ctx.params
        model, tokenizer, rt = load_for_inference(
            ctx.input("model") / "model",
            stage="evaluate_lm",
            precision=p.eval.precision,
            sharded=True,
        )
        n_params = count_parameters(model)
        scores: list[Score] = []
        sets: list[ItemSet] = []
        for lang, group in p.languages.items():
            e = p.eval
            texts = read_texts(ctx.input("data"), lang, e.split, e.max_texts_per_lang)
            st, cols = lm_items(
                model,
                tokenizer,
                texts,
                batch_size=e.batch_size,
                max_length=e.max_length,
                runtime=rt,
            )
            extra = {"nll": st.nll, "tokens": st.tokens, "bytes": st.bytes, "texts": len(texts)}
            items = ItemSet(
                p.label, lang, "lm", list(range(len(texts))), cols, group=group, size=p.size
            )
            sets.append(items)
            for metric, value in (
                ("perplexity", st.perplexity),
                ("bits_per_byte", st.bits_per_byte),
            ):
                score = Score(
                    model=p.label,
                    lang=lang,
                    metric=metric,
                    value=value,
                    group=group,
                    size=p.size,
                    params=n_params,
                    extra=extra,
                )
                scores.append(_with_ci(score, items, p.bootstrap))
        if ctx.is_main_process:
            write_items(ctx.out_dir / ITEMS_FILE, sets)
            write_scores(ctx.out_dir / "groups.jsonl", _group_scores(p, sets, n_params))
        return scores


def _with_ci(score: Score, items: ItemSet, cfg: BootstrapConfig) -> Score:
    return with_interval(score, interval_of(items, score.metric, cfg)) if items.n else score


def _group_scores(p: EvaluateLMParams, sets: list[ItemSet], n_params: int) -> list[Score]:
    """Group means (unweighted over languages) with stratified bootstrap intervals."""
    groups: dict[str, list[str]] = {}
    for lang, group in p.languages.items():
        groups.setdefault(group, []).append(lang)
    nonempty = [s for s in sets if s.n]
    out = []
    for metric in METRICS:
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
