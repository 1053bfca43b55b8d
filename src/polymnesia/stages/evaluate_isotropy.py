"""Stage ``evaluate_isotropy``: Table 2 of paper 000, isotropy of contextual embeddings.

Per language: last-layer vectors of the test verses, one per whitespace-word
occurrence with its sub-tokens pooled (``pooling``: ``last``, default, or
``mean``; :func:`polymnesia.evaluation.representations.contextual_vectors`),
then :func:`polymnesia.metrics.isotropy.isotropy_report` (Ethayarajh 2019,
linear time): self-similarity over words seen in at least two verses (pairs
from different verses only), intra-sentence similarity and first-PC variance,
each anisotropy-adjusted (raw minus the cosine of random word pairs from
different verses). The paper's Table 2 reports self-similarity; lower is
better. ``extra`` records the pooling and how many words and occurrences
were scored.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.evaluation.config import InferencePrecision, precision_field
from polymnesia.evaluation.inference import load_for_inference
from polymnesia.evaluation.representations import contextual_vectors
from polymnesia.metrics.isotropy import isotropy_report
from polymnesia.models import count_parameters
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score

ISOTROPY_METRICS = (
    "self_similarity_adjusted",
    "intra_sentence_similarity_adjusted",
    "first_pc_variance_explained_adjusted",
)


class EvaluateIsotropyParams(StrictModel):
    label: str = Field(description="the model's name in tables")
    size: str | None = None
    languages: dict[str, str] = Field(description="language -> group")
    split: str = "test"
    max_texts_per_lang: int | None = Field(200, gt=0)
    max_length: int = Field(128, gt=2)
    pooling: Literal["last", "mean"] = Field(
        "last",
        description="one vector per word occurrence from its sub-tokens: last (the position whose "
        "causal context holds the whole word) or mean",
    )
    seed: int = 0
    precision: InferencePrecision = precision_field()


@STAGES.register(
    "evaluate_isotropy", "Ethayarajh isotropy of last-layer vectors per language (Table 2)"
)
class EvaluateIsotropy(Stage):
    version = "2"
    distributed = True  # each process runs its shard of the texts; the vectors are gathered

    def run(self, ctx: StageContext) -> list[Score]:

        p: EvaluateIsotropyParams = ctx.params
        model, tok, rt = load_for_inference(
            ctx.input("model") / "model",
            stage="evaluate_isotropy",
            precision=p.precision,
            sharded=True,
        )
        n_params = count_parameters(model)
        scores = []
        for lang, group in p.languages.items():
            texts = read_texts(ctx.input("data"), lang, p.split, p.max_texts_per_lang)
            tv = contextual_vectors(
                model, tok, texts, max_length=p.max_length, pooling=p.pooling, runtime=rt
            )
            rep = isotropy_report(tv.H, tv.word_ids, tv.sent_ids, seed=p.seed)
            extra: dict[str, object] = {k: v for k, v in rep.items() if k not in ISOTROPY_METRICS}
            extra.update(tokens=tv.tokens, word_occurrences=int(len(tv.H)), pooling=p.pooling)
            for metric in ISOTROPY_METRICS:
                scores.append(
                    Score(
                        model=p.label,
                        lang=lang,
                        metric=metric,
                        value=rep[metric],
                        task="isotropy",
                        group=group,
                        size=p.size,
                        params=n_params,
                        extra=extra,
                    )
                )
        return scores
