"""Stage ``train_tokenizer``: a byte-level BPE on a temperature-sampled mixture."""

from __future__ import annotations

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score


class TrainTokenizerParams(StrictModel):
    languages: list[str]
    vocab_size: int
    temperature: float
    sample_texts: int
    min_frequency: int = 2
    seed: int = 0
    name_or_path: str | None = None


@STAGES.register(
    "train_tokenizer", "train a byte-level BPE tokenizer (or load a given one) into tokenizer/"
)
class TrainTokenizer(Stage):
    version = "1"

    def run(self, ctx: StageContext) -> list[Score]:
        from polymnesia.tokenizers.bpe import load_tokenizer, save_tokenizer, train_bpe_mixture

        p: TrainTokenizerParams = ctx.params
        if p.name_or_path:
            tok = load_tokenizer(p.name_or_path)
        else:
            texts = {lang: read_texts(ctx.input("data"), lang, "train") for lang in p.languages}
            tok = train_bpe_mixture(
                texts,
                p.vocab_size,
                temperature=p.temperature,
                total=p.sample_texts,
                seed=p.seed,
                min_frequency=p.min_frequency,
            )
        save_tokenizer(tok, ctx.out_dir / "tokenizer")
        return []
