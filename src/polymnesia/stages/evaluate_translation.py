"""Stage ``evaluate_translation``: Table 3 of Aggarwal et al. 2024, English-to-X with 4 examples.

The user turn is the paper's Figure 9 prompt; ``{{text}}`` holds four
English/target example pairs (the same four train-split verses for every
language) and the fifth English sentence. Greedy decoding, stopped at
``<|im_end|>``; sacrebleu BLEU and chrF against the aligned test verse.
The BLEU tokenizer is explicit (``bleu_tokenize``, default ``13a``; per
language ``bleu_tokenize_by_lang``; ``by_script`` picks zh / ja-mecab /
ko-mecab / char / 13a by the target's script); every tokenizer is checked
before any model runs and a missing one is one error line, never a fallback
(:mod:`polymnesia.metrics.translation`). Each score's ``extra`` records the
tokenizer, sacrebleu's signature and the scale (0-100; Aggarwal et al. 2024's Table 3
is 0-1). Departure: FLORES-200 is replaced by held-out parallel Bible verses.

Per-item evidence: each translated verse's sufficient statistics (chrF's 18
then BLEU's 10, :func:`~polymnesia.metrics.translation.translation_statistics`)
go to ``items.jsonl`` (kind ``stats``, ids = verse ids, aligned across arms);
summed they give the corpus scores exactly, so every score carries a
percentile bootstrap interval over verses and reports can run Koehn's (2004)
paired bootstrap between arms. ``floor_stats`` holds the same statistics of
each output against the reference of *another* verse (the next one in the
sample): the chrF a model gets for writing plausible text in the target
language that does not translate its source. A model that translates scores
above that floor (the report tests it, paired over verses).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from polymnesia.data.languages import get_language
from polymnesia.data.prepared import sample_aligned
from polymnesia.evaluation.generation import chat_prompt, greedy_generate
from polymnesia.items import (
    ITEMS_FILE,
    ItemSet,
    scores_with_intervals,
    write_items,
)
from polymnesia.metrics.base import scored_metrics
from polymnesia.metrics.translation import (
    BLEU_TOKENIZERS,
    bleu_signature,
    resolve_bleu_tokenizer,
    translation_statistics,
)
from polymnesia.models.build import count_parameters
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA, MODEL, ModelEvalParams, load_evaluated

FIGURE9 = (
    "The task is to translate the given sentence in English to language {language}. There are 4 "
    "examples provided below. Produce the translation of the 5th sentence:\n\n{text}"
)


class EvaluateTranslationParams(ModelEvalParams):
    languages: dict[str, str] = Field(description="target language -> group (en is skipped)")
    source_lang: str = "en"
    shots: int = Field(4, ge=0, description="examples in the prompt (paper: 4)")
    max_texts_per_lang: int | None = Field(16, gt=0)
    max_new_tokens: int = Field(64, gt=0)
    max_shot_chars: int = Field(
        200, gt=20, description="examples are drawn among verses this short"
    )
    batch_size: int = 8
    bleu_tokenize: str = Field(
        "13a",
        description="sacrebleu BLEU tokenizer (13a, intl, char, zh, none, ja-mecab, ko-mecab, "
        "flores101, flores200, spBLEU-1K) or by_script",
    )
    bleu_tokenize_by_lang: dict[str, str] = Field(
        default_factory=dict, description="target language -> tokenizer, overrides bleu_tokenize"
    )

    @field_validator("bleu_tokenize")
    @classmethod
    def _known(cls, v: str) -> str:
        return check_tokenizer_name(v)

    @field_validator("bleu_tokenize_by_lang")
    @classmethod
    def _known_by_lang(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v.values():
            check_tokenizer_name(name)
        return v


def check_tokenizer_name(name: str) -> str:
    """``name`` if it is one of sacrebleu's BLEU tokenizers or ``by_script`` (else one line)."""
    if name != "by_script" and name not in BLEU_TOKENIZERS:
        raise ValueError(
            f"unknown BLEU tokenizer '{name}'; accepted: {', '.join(BLEU_TOKENIZERS)}, by_script"
        )
    return name


def shifted(refs: list[str]) -> list[str]:
    """Each reference replaced by the next one (the last by the first): unrelated references."""
    return refs[1:] + refs[:1]


def build_prompt(examples: list[tuple[str, str]], source: str, src_name: str, tgt_name: str) -> str:
    shots = "".join(f"{src_name}: {s}\n{tgt_name}: {t}\n\n" for s, t in examples)
    return FIGURE9.format(language=tgt_name, text=f"{shots}{src_name}: {source}\n{tgt_name}:")


def tokenizers(p: EvaluateTranslationParams) -> dict[str, str]:
    """The BLEU tokenizer of each target language of ``p``."""

    return {
        lang: resolve_bleu_tokenizer(lang, p.bleu_tokenize, p.bleu_tokenize_by_lang)
        for lang in p.languages
        if lang != p.source_lang
    }


@STAGES.register(
    "evaluate_translation", "English-to-X few-shot greedy translation, BLEU and chrF (Table 3)"
)
class EvaluateTranslation(Stage[EvaluateTranslationParams]):
    category = "evaluation"
    version = "5"
    distributed = True  # each process translates its shard of the prompts; outputs are gathered
    inputs = (DATA, MODEL)
    outputs = (Artifact.ITEMS,)

    def run(self, ctx: StageContext[EvaluateTranslationParams]) -> list[Score]:
        p = ctx.params
        signatures = {  # checked before any model runs: one line if a tokenizer is missing
            lang: bleu_signature(tokenize) for lang, tokenize in tokenizers(p).items()
        }
        model, tok, rt = load_evaluated(ctx, p, "evaluate_translation")
        n_params = count_parameters(model)
        data = ctx.input(DATA)
        src_name = get_language(p.source_lang).name
        scores: list[Score] = []
        sets: list[ItemSet] = []
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
                chat_prompt(build_prompt(examples, r["text"], src_name, name), tokenizer=tok)
                for r in test[p.source_lang]
            ]
            hyps = greedy_generate(
                model,
                tok,
                prompts,
                max_new_tokens=p.max_new_tokens,
                batch_size=p.batch_size,
                runtime=rt,
            )
            refs = [r["text"] for r in test[lang]]
            tokenize = tokenizers(p)[lang]
            items = ItemSet(
                p.label,
                lang,
                "stats",
                [r["id"] for r in test[lang]],
                {
                    "stats": translation_statistics(hyps, refs, tokenize),
                    "floor_stats": translation_statistics(hyps, shifted(refs), tokenize),
                },
                task="translation",
                group=group,
                size=p.size,
                extra={"layout": "chrF 18 statistics, then BLEU 10", "bleu_tokenize": tokenize},
            )
            sets.append(items)
            extra = {
                "texts": len(refs),
                "bleu_tokenize": tokenize,
                "bleu_signature": signatures[lang],
                "scale": "0-100",
                "sample_hyp": hyps[0] if hyps else "",
            }
            scores += scores_with_intervals(
                items,
                scored_metrics("stats"),  # every metric registered for these items
                p.bootstrap,
                model=p.label,
                lang=lang,
                task="translation",
                group=group,
                size=p.size,
                params=n_params,
                extra=extra,
            )
        if ctx.is_main_process:  # every process holds the gathered items
            write_items(ctx.out_dir / ITEMS_FILE, sets)
        return scores
