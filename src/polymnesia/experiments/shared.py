"""One builder per shared stage: every protocol prepares data, trains a tokenizer, pretrains
its base model and scores language modelling through these functions, so equal settings give
equal stage specs (and so one cache entry) in every protocol and arm.
"""

from __future__ import annotations

from polymnesia.data.config import DataConfig
from polymnesia.evaluation.config import EvalConfig
from polymnesia.experiments.sections import BaseModelSection
from polymnesia.models import ModelConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages import common as roles
from polymnesia.stages.data import PrepareDataParams
from polymnesia.stages.evaluate_lm import EvaluateLMParams
from polymnesia.stages.import_model import ImportModelParams
from polymnesia.stages.pretrain import PretrainParams
from polymnesia.stages.tokenizer import TrainTokenizerParams
from polymnesia.training.config import TrainConfig

#: the shared stages' names (their input roles are ``roles.DATA``, ``roles.TOKENIZER``, ...)
DATA, TOKENIZER, PRETRAIN = "data", "tokenizer", "pretrain"


def data_stage(data: DataConfig, languages: list[str]) -> StageSpec:
    """``prepare_data`` for ``languages`` (stage name ``data``)."""
    return StageSpec(
        DATA, "prepare_data", PrepareDataParams(data=data, languages=list(dict.fromkeys(languages)))
    )


def tokenizer_stage(base: BaseModelSection, seed: int) -> StageSpec:
    """``train_tokenizer`` on the base model's languages (stage name ``tokenizer``)."""
    params = TrainTokenizerParams(tokenizer=base.tokenizer, languages=base.languages, seed=seed)
    return StageSpec(TOKENIZER, "train_tokenizer", params, {roles.DATA: DATA})


def pretrain_stage(
    base: BaseModelSection,
    seed: int,
    *,
    name: str = PRETRAIN,
    model: ModelConfig | None = None,
    train: TrainConfig | None = None,
) -> StageSpec:
    """``pretrain`` of the base model; ``model``/``train`` replace the base's (size sweeps,
    plugins).
    """
    params = PretrainParams(
        model=model or base.model,
        train=train or base.train,
        languages=base.languages,
        temperature=base.mixture_temperature,
        seed=seed,
    )
    return StageSpec(name, "pretrain", params, {roles.DATA: DATA, roles.TOKENIZER: TOKENIZER})


def import_stage(base: BaseModelSection) -> StageSpec:
    """``import_model`` of ``base.model.name_or_path`` as it is, under the pretraining stage's
    name.
    """
    params = ImportModelParams(model=base.model, tokenizer=base.tokenizer.name_or_path)
    return StageSpec(PRETRAIN, "import_model", params)


def base_stages(
    base: BaseModelSection, data: DataConfig, languages: list[str], seed: int
) -> list[StageSpec]:
    """Data (for ``languages``), tokenizer and pretraining: the start of every protocol.

    With ``base.pretrain: false`` the loaded model is used as it is: data and an
    ``import_model`` stage named ``pretrain`` (its own tokenizer; no tokenizer stage).
    """
    if not base.pretrain:
        return [data_stage(data, languages), import_stage(base)]
    return [data_stage(data, languages), tokenizer_stage(base, seed), pretrain_stage(base, seed)]


def evaluate_lm_stage(
    name: str,
    label: str,
    model_stage: str,
    languages: dict[str, str],
    evaluate: EvalConfig,
    size: str | None = None,
    kind: str = "evaluate_lm",
    data: str = DATA,
) -> StageSpec:
    """``evaluate_lm`` of ``model_stage`` on ``languages`` (language -> group) of the ``data``
    stage's test split; ``kind`` ``pretraining_loss`` scores the model's own pre-training loss
    instead (causal or masked)."""
    params = EvaluateLMParams(label=label, size=size, languages=languages, eval=evaluate)
    return StageSpec(name, kind, params, {roles.DATA: data, roles.MODEL: model_stage})
