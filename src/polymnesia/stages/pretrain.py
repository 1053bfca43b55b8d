"""Stage ``pretrain``: a decoder trained from scratch (or continued) on a language mixture."""

from __future__ import annotations

from polymnesia.config.base import StrictModel
from polymnesia.io import atomic_write_json
from polymnesia.models import ModelConfig, build_model, count_parameters
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import packed_mixture, validation_eval_fn
from polymnesia.tokenizers.bpe import load_tokenizer
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.loop import train
from polymnesia.training.plugins import build_plugins


class PretrainParams(StrictModel):
    model: ModelConfig
    train: TrainConfig
    languages: list[str]
    temperature: float = 3.0
    seed: int = 0


@STAGES.register(
    "pretrain", "train a causal LM on a temperature-sampled language mixture into model/"
)
class Pretrain(Stage):
    role = "training"
    version = "1"
    distributed = True
    resumable = True

    def run(self, ctx: StageContext) -> list[Score]:
        p: PretrainParams = ctx.params
        tokenizer = load_tokenizer(str(ctx.input("tokenizer") / "tokenizer"))
        blocks = packed_mixture(
            ctx.input("data"),
            tokenizer,
            p.languages,
            temperature=p.temperature,
            block_size=p.train.block_size,
            seed=p.seed,
        )
        model = build_model(p.model, tokenizer, seed=p.seed)

        eval_fn = (
            validation_eval_fn(ctx.input("data"), tokenizer, p.languages)
            if p.train.eval_every
            else None
        )
        model, result = train(
            model,
            PackedLMData(blocks),
            p.train,
            ctx.out_dir,
            seed=p.seed,
            plugins=build_plugins(p.train.plugins, ctx.inputs),
            eval_fn=eval_fn,
            tracker_name=ctx.spec.name,
        )
        if ctx.is_main_process:
            save_model_and_tokenizer(model, tokenizer, ctx.out_dir / "model")
            atomic_write_json(
                ctx.out_dir / "train_summary.json",
                {
                    "steps": result.steps,
                    "engine": result.engine,
                    "final_loss": result.final_loss,
                    "tokens": result.tokens,
                    "seconds": round(result.seconds, 2),
                    "resumed_from": result.resumed_from,
                    "parameters": count_parameters(model),
                    "blocks": int(blocks.shape[0]),
                },
            )
        return []
