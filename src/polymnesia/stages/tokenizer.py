"""Stage ``train_tokenizer``: a byte-level BPE on a temperature-sampled mixture."""

from __future__ import annotations

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA
from polymnesia.tokenizers.bpe import load_tokenizer, save_tokenizer, train_bpe_mixture
from polymnesia.tokenizers.config import TokenizerConfig


class TrainTokenizerParams(StrictModel):
    tokenizer: TokenizerConfig
    languages: list[str]
    seed: int = 0


@STAGES.register(
    "train_tokenizer", "train a byte-level BPE tokenizer (or load a given one) into tokenizer/"
)
class TrainTokenizer(Stage[TrainTokenizerParams]):
    category = "data"
    version = "1"
    inputs = (DATA,)
    outputs = (Artifact.TOKENIZER,)

    def run(self, ctx: StageContext[TrainTokenizerParams]) -> list[Score]:
        p = ctx.params
        t = p.tokenizer
        if t.name_or_path:
            tok = load_tokenizer(t.name_or_path)
        else:
            texts = {lang: read_texts(ctx.input(DATA), lang, "train") for lang in p.languages}
            tok = train_bpe_mixture(
                texts,
                t.vocab_size,
                temperature=t.temperature,
                total=t.sample_texts,
                seed=p.seed,
                min_frequency=t.min_frequency,
            )
        save_tokenizer(tok, ctx.out_dir / "tokenizer")
        return []
