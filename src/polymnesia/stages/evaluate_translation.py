"""Stage ``evaluate_translation``: Table 3 of paper 000, English-to-X with 4 examples.

The user turn is the paper's Figure 9 prompt; ``{{text}}`` holds four
English/target example pairs (the same four train-split verses for every
language) and the fifth English sentence. Greedy decoding, stopped at
``<|im_end|>``; sacrebleu BLEU (tokenizer per language, see
:mod:`polymnesia.metrics.translation`) and chrF against the aligned test verse.
Departure: FLORES-200 is replaced by held-out parallel Bible verses.
"""

from __future__ import annotations

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.languages import get_language
from polymnesia.evaluation.generation import chat_prompt, greedy_generate, sample_aligned
from polymnesia.metrics.translation import bleu, bleu_tokenizer_for, chrf
from polymnesia.models import count_parameters
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import load_model_and_tokenizer

FIGURE9 = (
    "The task is to translate the given sentence in English to language {language}. There are 4 "
    "examples provided below. Produce the translation of the 5th sentence:\n\n{text}"
)


class EvaluateTranslationParams(StrictModel):
    label: str
    size: str | None = None
    languages: dict[str, str] = Field(description="target language -> group (en is skipped)")
    source_lang: str = "en"
    shots: int = Field(4, ge=0, description="examples in the prompt (paper: 4)")
    max_texts_per_lang: int | None = Field(16, gt=0)
    max_new_tokens: int = Field(64, gt=0)
    max_shot_chars: int = Field(
        200, gt=20, description="examples are drawn among verses this short"
    )
    batch_size: int = 8
    seed: int = 0


def build_prompt(examples: list[tuple[str, str]], source: str, src_name: str, tgt_name: str) -> str:
    shots = "".join(f"{src_name}: {s}\n{tgt_name}: {t}\n\n" for s, t in examples)
    return FIGURE9.format(language=tgt_name, text=f"{shots}{src_name}: {source}\n{tgt_name}:")


@STAGES.register(
    "evaluate_translation", "English-to-X few-shot greedy translation, BLEU and chrF (Table 3)"
)
class EvaluateTranslation(Stage):
    version = "1"

    def run(self, ctx: StageContext) -> list[Score]:

        p: EvaluateTranslationParams = ctx.params
        model, tok = load_model_and_tokenizer(ctx.input("model") / "model")
        n_params = count_parameters(model)
        data = ctx.input("data")
        src_name = get_language(p.source_lang).name
        scores = []
        for lang, group in p.languages.items():
            if lang == p.source_lang:
                continue
            pair = [p.source_lang, lang]
            test = sample_aligned(data, pair, "test", p.max_texts_per_lang, p.seed)
            train = sample_aligned(data, pair, "train", None)
            short = [
                i
                for i, r in enumerate(train[p.source_lang])
                if len(r["text"]) <= p.max_shot_chars
                and len(train[lang][i]["text"]) <= p.max_shot_chars
            ]
            examples = [
                (train[p.source_lang][i]["text"], train[lang][i]["text"]) for i in short[: p.shots]
            ]
            name = get_language(lang).name
            prompts = [
                chat_prompt(build_prompt(examples, r["text"], src_name, name))
                for r in test[p.source_lang]
            ]
            hyps = greedy_generate(
                model, tok, prompts, max_new_tokens=p.max_new_tokens, batch_size=p.batch_size
            )
            refs = [r["text"] for r in test[lang]]
            tokenize = bleu_tokenizer_for(lang)
            extra = {
                "texts": len(refs),
                "bleu_tokenize": tokenize,
                "sample_hyp": hyps[0] if hyps else "",
            }
            for metric, value in (
                ("bleu", bleu(hyps, refs, tokenize=tokenize)),
                ("chrf", chrf(hyps, refs)),
            ):
                scores.append(
                    Score(
                        model=p.label,
                        lang=lang,
                        metric=metric,
                        value=value,
                        task="translation",
                        group=group,
                        size=p.size,
                        params=n_params,
                        extra=extra,
                    )
                )
        return scores
