"""Stage ``evaluate_isotropy``: Table 2 of Aggarwal et al. 2024, isotropy of contextual embeddings.

Per language: last-layer vectors of the test verses, one per word occurrence
(whitespace words; single characters in scripts written without spaces) with its
sub-tokens pooled (``pooling``: ``last``, default, or
``mean``; :func:`polymnesia.evaluation.representations.contextual_vectors`),
then :func:`polymnesia.metrics.isotropy.isotropy_report` (Ethayarajh 2019,
linear time): self-similarity over words seen in at least two verses (pairs
from different verses only), intra-sentence similarity and first-PC variance,
each anisotropy-adjusted (raw minus the cosine of random word pairs from
different verses). The paper's Table 2 reports self-similarity; lower is
better. ``extra`` records the pooling and how many words and occurrences
were scored.

Self-similarity carries a percentile bootstrap interval over the scored
words: each word's anisotropy-adjusted self-similarity goes to
``items.jsonl`` (kind ``values``, ids = the words, so arms align on the same
words of the same verses). The interval treats words as independent and the
anisotropy baseline as fixed, so it is somewhat narrow (a word's occurrences
share verses with other words'). Intra-sentence similarity and first-PC
variance get no interval.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from polymnesia.data.prepared import read_texts
from polymnesia.evaluation.representations import TokenVectors, contextual_vectors
from polymnesia.items import ITEMS_FILE, ItemSet, interval_of, write_items
from polymnesia.metrics.isotropy import isotropy_report, self_similarity_by_word
from polymnesia.models.build import count_parameters
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score, with_interval
from polymnesia.stages.common import DATA, MODEL, ModelEvalParams, load_evaluated

SELF_SIMILARITY = "self_similarity_adjusted"
ISOTROPY_METRICS = (
    "self_similarity_adjusted",
    "intra_sentence_similarity_adjusted",
    "first_pc_variance_explained_adjusted",
)


class EvaluateIsotropyParams(ModelEvalParams):
    split: str = "test"
    max_texts_per_lang: int | None = Field(200, gt=0)
    max_length: int = Field(128, gt=2)
    pooling: Literal["last", "mean"] = Field(
        "last",
        description="one vector per word occurrence from its sub-tokens: last (the position whose "
        "causal context holds the whole word) or mean",
    )


@STAGES.register(
    "evaluate_isotropy", "Ethayarajh isotropy of last-layer vectors per language (Table 2)"
)
class EvaluateIsotropy(Stage[EvaluateIsotropyParams]):
    category = "evaluation"
    version = "5"
    distributed = True  # each process runs its shard of the texts; the vectors are gathered
    inputs = (DATA, MODEL)
    outputs = (Artifact.ITEMS,)

    def run(self, ctx: StageContext[EvaluateIsotropyParams]) -> list[Score]:
        p = ctx.params
        model, tok, rt = load_evaluated(ctx, p, "evaluate_isotropy")
        n_params = count_parameters(model)
        scores: list[Score] = []
        sets: list[ItemSet] = []
        for lang, group in p.languages.items():
            texts = read_texts(ctx.input(DATA), lang, p.split, p.max_texts_per_lang)
            tv = contextual_vectors(
                model, tok, texts, max_length=p.max_length, pooling=p.pooling, runtime=rt
            )
            rep = isotropy_report(tv.H, tv.word_ids, tv.sent_ids, seed=p.seed)
            extra: dict[str, object] = {k: v for k, v in rep.items() if k not in ISOTROPY_METRICS}
            extra.update(tokens=tv.tokens, word_occurrences=int(len(tv.H)), pooling=p.pooling)
            items = _word_items(p, lang, group, tv, rep["anisotropy_baseline"])
            sets.append(items)
            for metric in ISOTROPY_METRICS:
                score = Score(
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
                if metric == SELF_SIMILARITY:
                    score = with_interval(score, interval_of(items, metric, p.bootstrap))
                scores.append(score)
        if ctx.is_main_process:  # every process holds the gathered items
            write_items(ctx.out_dir / ITEMS_FILE, sets)
        return scores


def _word_items(
    p: EvaluateIsotropyParams, lang: str, group: str, tv: TokenVectors, baseline: float
) -> ItemSet:
    """Each scored word's adjusted self-similarity (their mean is the language's score)."""
    ids, values = self_similarity_by_word(tv.H, tv.word_ids, tv.sent_ids)
    return ItemSet(
        p.label,
        lang,
        "values",
        [tv.words[int(i)] for i in ids],
        {"values": [float(v) - baseline for v in values]},
        task="isotropy",
        group=group,
        size=p.size,
        extra={"metric": SELF_SIMILARITY, "pooling": p.pooling},
    )
