"""Helpers shared by stages that train or evaluate models: the input roles several kinds
read, the training glue of every training stage, model evaluation helpers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.data.sampling import sample_mixture
from polymnesia.evaluation.config import InferencePrecision, precision_field
from polymnesia.evaluation.inference import load_for_inference
from polymnesia.evaluation.likelihood import lm_stats
from polymnesia.io import atomic_write_json
from polymnesia.items import BootstrapConfig
from polymnesia.pipeline.stage import Artifact, Family, Role, StageContext
from polymnesia.runtime import Runtime
from polymnesia.tokenizers.encode import token_ids
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import TrainData, pack_documents
from polymnesia.training.loop import TrainResult, train
from polymnesia.training.plugins import PluginOptions, StepFn, TrainingPlugin, build_plugins

#: input roles several kinds read: prepared data, a model folder, a tokenizer
DATA = Role("data", Artifact.SPLITS)
MODEL = Role("model", Artifact.MODEL)
TOKENIZER = Role("tokenizer", Artifact.TOKENIZER)
#: numbered model inputs ``model_0 .. model_N`` (merge_models, representation_drift)
MODELS = Family("model_", Artifact.MODEL)


class ModelEvalParams(StrictModel):
    """The parameters every per-language evaluation of one model folder shares."""

    label: str = Field(description="the model's name in tables")
    size: str | None = None
    languages: dict[str, str] = Field(description="language -> group")
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    seed: int = 0
    precision: InferencePrecision = precision_field()


def load_evaluated(
    ctx: StageContext[Any], p: ModelEvalParams, stage: str
) -> tuple[torch.nn.Module, Any, Runtime]:
    """The ``model`` input placed for a distributed evaluation stage in its precision."""
    return load_for_inference(
        ctx.input(MODEL) / "model", stage=stage, precision=p.precision, sharded=True
    )


# -- the training glue of every training stage -------------------------------------------------
def plugin_inputs(entries: Sequence[PluginOptions]) -> list[Role]:
    """The input roles ``train.plugins`` entries name (``before: base``): model folders (or
    what the plugin reads there) the spec must give, so a missing one is refused at plan
    time."""
    return [Role(role, reads) for entry in entries for role, reads in entry.input_roles()]


@dataclass
class Trained:
    """What :func:`train_in_stage` returns: the trained model, the loop's result and the
    plugins built from the config's entries (a stage may read their state: EWC's Fisher)."""

    model: torch.nn.Module
    result: TrainResult
    plugins: list[TrainingPlugin]


def train_in_stage(
    ctx: StageContext[Any],
    model: torch.nn.Module,
    data: TrainData,
    cfg: TrainConfig,
    *,
    seed: int,
    plugins: Sequence[PluginOptions] | None = None,
    before: Sequence[TrainingPlugin] = (),
    step_fn: StepFn | None = None,
    eval_fn: Callable[[torch.nn.Module], dict[str, float]] | None = None,
) -> Trained:
    """``training.loop.train`` as every training stage calls it: into the stage's entry, its
    plugins built from ``plugins`` (default ``cfg.plugins``) with their input roles resolved to
    the stage's inputs and run after ``before``, trackers named after the stage."""
    built = build_plugins(list(cfg.plugins if plugins is None else plugins), ctx.inputs)
    kw: dict[str, Any] = {"step_fn": step_fn} if step_fn is not None else {}
    model, result = train(
        model,
        data,
        cfg,
        ctx.out_dir,
        seed=seed,
        plugins=[*before, *built],
        eval_fn=eval_fn,
        tracker_name=ctx.spec.name,
        **kw,
    )
    return Trained(model, result, built)


def train_summary(result: TrainResult, **extra: Any) -> dict[str, Any]:
    """The ``train_summary.json`` fields every training stage writes, then ``extra``."""
    return {
        "steps": result.steps,
        "engine": result.engine,
        "final_loss": result.final_loss,
        "seconds": round(result.seconds, 2),
        **extra,
    }


def write_train_summary(ctx: StageContext[Any], summary: Mapping[str, Any]) -> None:
    """``train_summary.json`` in the stage's entry (main process only)."""
    if ctx.is_main_process:
        atomic_write_json(ctx.out_dir / "train_summary.json", dict(summary))


def packed_mixture(
    data_dir: Path,
    tokenizer: Any,
    languages: list[str],
    *,
    temperature: float,
    block_size: int,
    seed: int,
    split: str = "train",
) -> torch.Tensor:
    """Temperature-sampled documents of ``languages``, tokenized with BOS, packed with EOS."""
    texts = {lang: read_texts(data_dir, lang, split) for lang in languages}
    total = sum(len(v) for v in texts.values())
    docs = [t for _, t in sample_mixture(texts, temperature, total, seed)]
    ids = token_ids(tokenizer, docs)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    return pack_documents([bos + list(x) for x in ids], block_size, tokenizer.eos_token_id)


def validation_eval_fn(data_dir: Path, tokenizer: Any, languages: list[str], per_lang: int = 16):
    """An eval_fn for the loop: mean validation loss and bits per byte over ``languages``."""
    texts = [t for lang in languages for t in read_texts(data_dir, lang, "validation", per_lang)]

    def evaluate(model: torch.nn.Module) -> dict[str, float]:
        stats = lm_stats(model, tokenizer, texts, batch_size=32, max_length=256)
        return {
            "val_loss": round(stats.loss, 5),
            "val_bits_per_byte": round(stats.bits_per_byte, 5),
        }

    return evaluate
