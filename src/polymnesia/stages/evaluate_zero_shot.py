"""Stage ``evaluate_zero_shot``: genre classification of verses in every language.

The downstream task that works offline (replacing the paper's six benchmarks):
after English-only instruction tuning, the model is asked the English genre
question of :mod:`polymnesia.instructions.records` about a test verse in language
X, and answers by likelihood: each of the 9 genre names is scored as the
assistant's reply (summed log-probability of the name and ``<|im_end|>``),
and the best-scoring one is the prediction. ``scoring`` chooses the score
(:mod:`polymnesia.evaluation.calibration`): ``raw`` likelihood (default, as
lm-evaluation-harness's ``acc``), ``length_normalised``, ``pmi``
(domain-conditional PMI, Holtzman et al. 2021) or ``contextual`` (contextual
calibration, Zhao et al. 2021). Accuracy and macro-F1 per language, each
with a percentile bootstrap interval over the test verses; the predictions
and gold genres go to ``items.jsonl`` (kind ``label``, ids = verse ids, the
same verses in every language and arm) for group intervals, paired tests
between arms and the chance / majority-class baselines of the report.
``extra.scoring`` records the scoring, ``extra.majority`` the accuracy of
always answering the most frequent genre of the sample.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import Field

from polymnesia.data.prepared import sample_aligned
from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.evaluation.calibration import answer_prior, score_answers
from polymnesia.evaluation.generation import answer_logprobs_many, chat_prompt
from polymnesia.instructions.records import genre_instruction, genre_name
from polymnesia.items import (
    ITEMS_FILE,
    ItemSet,
    scores_with_intervals,
    write_items,
)
from polymnesia.metrics.base import scored_metrics
from polymnesia.models.build import count_parameters
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA, MODEL, ModelEvalParams, load_evaluated


class EvaluateZeroShotParams(ModelEvalParams):
    split: str = "test"
    max_texts_per_lang: int | None = Field(90, gt=0)
    scoring: Literal["raw", "length_normalised", "pmi", "contextual"] = Field(
        "raw",
        description="answer score: raw log-likelihood, length_normalised (per character), pmi "
        "(domain-conditional PMI, Holtzman et al. 2021) or contextual (Zhao et al. 2021)",
    )


@STAGES.register(
    "evaluate_zero_shot", "zero-shot genre classification of verses by answer likelihood"
)
class EvaluateZeroShot(Stage[EvaluateZeroShotParams]):
    category = "evaluation"
    version = "4"
    distributed = True  # each process scores its shard of the prompts; predictions are gathered
    inputs = (DATA, MODEL)
    outputs = (Artifact.ITEMS,)

    def run(self, ctx: StageContext[EvaluateZeroShotParams]) -> list[Score]:
        p = ctx.params
        model, tok, rt = load_evaluated(ctx, p, "evaluate_zero_shot")
        n_params = count_parameters(model)
        names = [genre_name(g) for g in BIBLE_GENRES]
        question = genre_instruction(BIBLE_GENRES)
        prior = answer_prior(model, tok, question, names, p.scoring)  # English question: shared
        sample = sample_aligned(
            ctx.input(DATA), list(p.languages), p.split, p.max_texts_per_lang, p.seed
        )
        scores: list[Score] = []
        sets: list[ItemSet] = []
        for lang, group in p.languages.items():
            recs = sample[lang]
            gold = [BIBLE_GENRES.index(r["meta"]["genre"]) for r in recs]
            prompts = [chat_prompt(question, r["text"], tok) for r in recs]
            lps = answer_logprobs_many(model, tok, prompts, names, runtime=rt)
            pred = [
                int(score_answers(lp, p.scoring, answers=names, prior=prior).argmax()) for lp in lps
            ]
            extra = {
                "scoring": p.scoring,
                "texts": len(recs),
                "majority": Counter(gold).most_common(1)[0][1] / len(gold),
                "predicted": dict(Counter(names[i] for i in pred)),
            }
            items = ItemSet(
                p.label,
                lang,
                "label",
                [r["id"] for r in recs],
                {"pred": [float(x) for x in pred], "gold": [float(x) for x in gold]},
                task="genre",
                group=group,
                size=p.size,
                n_labels=len(names),
                extra={"scoring": p.scoring},
            )
            sets.append(items)
            scores += scores_with_intervals(
                items,
                scored_metrics("label"),  # every metric registered for these items
                p.bootstrap,
                model=p.label,
                lang=lang,
                task="genre",
                group=group,
                size=p.size,
                params=n_params,
                extra=extra,
            )
        if ctx.is_main_process:  # every process holds the gathered items
            write_items(ctx.out_dir / ITEMS_FILE, sets)
        return scores
