"""Stage ``pretrain``: a decoder trained from scratch (or continued) on a language mixture."""

from __future__ import annotations

from collections.abc import Sequence

from polymnesia.config.base import StrictModel
from polymnesia.models import ModelConfig
from polymnesia.models.build import build_model, count_parameters
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import (
    STAGES,
    Artifact,
    Provenance,
    Stage,
    StageContext,
    named_models,
)
from polymnesia.results import Score
from polymnesia.stages.common import (
    DATA,
    TOKENIZER,
    packed_mixture,
    plugin_inputs,
    train_in_stage,
    train_summary,
    validation_eval_fn,
    write_train_summary,
)
from polymnesia.tokenizers.bpe import load_tokenizer
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData


class PretrainParams(StrictModel):
    model: ModelConfig
    train: TrainConfig
    languages: list[str]
    temperature: float = 3.0
    seed: int = 0


@STAGES.register(
    "pretrain", "train a causal LM on a temperature-sampled language mixture into model/"
)
class Pretrain(Stage[PretrainParams]):
    category = "training"
    version = "1"
    distributed = True
    resumable = True
    inputs = (DATA, TOKENIZER)
    outputs = (Artifact.MODEL,)

    @classmethod
    def named_inputs(cls, params: PretrainParams) -> Sequence[str]:
        return plugin_inputs(params.train.plugins)

    @classmethod
    def provenance(cls, params: PretrainParams) -> Provenance:
        """For a model card: the languages of its mixture, and the model it continues
        (``model.name_or_path``)."""
        return Provenance(tuple(params.languages), named_models(params.model.name_or_path))

    def run(self, ctx: StageContext[PretrainParams]) -> list[Score]:
        p = ctx.params
        tokenizer = load_tokenizer(str(ctx.input(TOKENIZER) / "tokenizer"))
        blocks = packed_mixture(
            ctx.input(DATA),
            tokenizer,
            p.languages,
            temperature=p.temperature,
            block_size=p.train.block_size,
            seed=p.seed,
        )
        model = build_model(p.model, tokenizer, seed=p.seed)

        eval_fn = (
            validation_eval_fn(ctx.input(DATA), tokenizer, p.languages)
            if p.train.eval_every
            else None
        )
        done = train_in_stage(
            ctx, model, PackedLMData(blocks), p.train, seed=p.seed, eval_fn=eval_fn
        )
        if ctx.is_main_process:
            save_model_and_tokenizer(done.model, tokenizer, ctx.out_dir / "model")
        r = done.result
        write_train_summary(
            ctx,
            train_summary(
                r,
                tokens=r.tokens,
                resumed_from=r.resumed_from,
                parameters=count_parameters(done.model),
                blocks=int(blocks.shape[0]),
            ),
        )
        return []
