"""Stage ``evaluate_lm``: perplexity and bits per byte per language on held-out text."""

from __future__ import annotations

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.evaluation.config import EvalConfig
from polymnesia.evaluation.likelihood import lm_stats
from polymnesia.models import count_parameters
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import load_model_and_tokenizer


class EvaluateLMParams(StrictModel):
    label: str = Field(description="the model's name in tables (an arm: Baseline, BA, AFA)")
    size: str | None = None
    languages: dict[str, str] = Field(description="language -> group")
    eval: EvalConfig = Field(default_factory=EvalConfig)


@STAGES.register("evaluate_lm", "token perplexity and bits per byte per language and group")
class EvaluateLM(Stage):
    version = "1"
    distributed = True

    def run(self, ctx: StageContext) -> list[Score]:

        p: EvaluateLMParams = ctx.params
        model, tokenizer = load_model_and_tokenizer(ctx.input("model") / "model")
        n_params = count_parameters(model)
        scores: list[Score] = []
        for lang, group in p.languages.items():
            e = p.eval
            texts = read_texts(ctx.input("data"), lang, e.split, e.max_texts_per_lang)
            st = lm_stats(model, tokenizer, texts, batch_size=e.batch_size, max_length=e.max_length)
            extra = {"nll": st.nll, "tokens": st.tokens, "bytes": st.bytes, "texts": len(texts)}
            for metric, value in (
                ("perplexity", st.perplexity),
                ("bits_per_byte", st.bits_per_byte),
            ):
                scores.append(
                    Score(
                        model=p.label,
                        lang=lang,
                        metric=metric,
                        value=value,
                        group=group,
                        size=p.size,
                        params=n_params,
                        extra=extra,
                    )
                )
        return scores
