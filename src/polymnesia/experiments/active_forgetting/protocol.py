"""Protocol ``active_forgetting``: Aggarwal et al. 2024 end to end (their Figure 1).

Three arms share what they can (one data stage, one tokenizer; the baseline
pretraining serves Baseline and BA):

* **Baseline**: pretrain on the pretraining languages -> instruction-tune (English);
* **BA**: the same base model -> vocabulary expansion on the adapting
  languages (new rows + head trained, body frozen) -> instruction-tune;
* **AFA**: pretrain with active forgetting (embeddings reset every K steps)
  -> vocabulary expansion -> instruction-tune.

Evaluation per language and group: perplexity and bits per byte (Table 1) and
isotropy (Table 2) of the models before instruction tuning (Baseline = the
base model, BA/AFA = the adapted ones, as the paper studies M_adapted);
English-to-X translation (Table 3) and zero-shot genre classification of the
instruction-tuned models, each with bootstrap intervals over test items (the
stages keep ``items.jsonl``). With ``evaluate.harness`` the instruction-tuned models
are also evaluated through lm-evaluation-harness (``harness_{arm}``). With
``sizes`` the whole pipeline runs per model size and the report draws Figure 3.

Defaults follow Tables 4-5 scaled down for a CPU: pretraining lr 1e-4 ->
config, 150,000 steps -> a few hundred, reset every 10,000 -> K with the same
ratio steps/K = 15 where affordable, weight decay 0, 10% linear warmup,
cosine; finetuning lr 1e-6, 5 epochs, batch 16 (a tiny model trained for a
few hundred steps needs a larger lr: the configs say what they use).
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.active_forgetting.config import ActiveForgettingConfig
from polymnesia.experiments.active_forgetting.report import write_report
from polymnesia.experiments.base import EXPERIMENTS, ExperimentConfig
from polymnesia.experiments.papers import cite
from polymnesia.experiments.seeds import SeededExperiment
from polymnesia.experiments.shared import (
    DATA,
    data_stage,
    evaluate_lm_stage,
    pretrain_stage,
    tokenizer_stage,
)
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages import common as roles
from polymnesia.stages.adapt_vocabulary import AdaptVocabularyParams
from polymnesia.stages.evaluate_harness import EvaluateHarnessParams, harness_dtype
from polymnesia.stages.evaluate_isotropy import EvaluateIsotropyParams
from polymnesia.stages.evaluate_translation import EvaluateTranslationParams
from polymnesia.stages.evaluate_zero_shot import EvaluateZeroShotParams
from polymnesia.stages.instruct import InstructParams
from polymnesia.stages.instruction_data import InstructionDataParams, instruct_set

#: the stage (and the instruct stages' input role) that builds the English instruction records
INSTRUCTIONS = "instructions"


def instruction_stage(cfg: ActiveForgettingConfig) -> StageSpec:
    """Aggarwal et al. 2024's English instruction records, built by the two-phase CFT paper's
    ``instruction_data`` stage
    (one set for every arm and size: the records depend on the data and the seed only)."""
    params = InstructionDataParams(name=INSTRUCTIONS, set=instruct_set(cfg.instruct), seed=cfg.seed)
    return StageSpec(INSTRUCTIONS, "instruction_data", params, {roles.DATA: DATA})


def _size_stages(cfg: ActiveForgettingConfig, size: str | None) -> list[StageSpec]:
    """Every stage of the three arms at one model size (``None``: the ``model`` section)."""
    sfx = f"_{size}" if size else ""
    model = cfg.model.model_copy(update={"preset": size}) if size else cfg.model
    label = size or model.preset or "model"  # the tables' size block label
    base, langs = cfg.base(), cfg.groups.group_of()
    specs = [
        pretrain_stage(base, cfg.seed, name=f"pretrain{sfx}", model=model),
        pretrain_stage(
            base, cfg.seed, name=f"pretrain_af{sfx}", model=model, train=cfg.forgetting_train()
        ),
    ]
    for arm, pretrained in (("BA", "pretrain"), ("AFA", "pretrain_af")):
        params = AdaptVocabularyParams(
            adapt=cfg.adapt,
            label=arm,
            size=label,
            adapting=cfg.groups.adapting,
            pretraining=cfg.groups.pretraining,
            temperature=cfg.tokenizer.temperature,
            min_frequency=cfg.tokenizer.min_frequency,
            fertility_languages=langs,
            fertility_texts=cfg.evaluate.max_texts_per_lang or 200,
            seed=cfg.seed,
        )
        inputs: dict[str, str] = {roles.DATA: DATA, roles.MODEL: pretrained + sfx}
        specs.append(StageSpec(f"adapt_{arm}{sfx}", "adapt_vocabulary", params, inputs))
    sources = {"Baseline": "pretrain", "BA": "adapt_BA", "AFA": "adapt_AFA"}
    for arm, src in sources.items():
        params_i = InstructParams(instruct=cfg.instruct, records=[INSTRUCTIONS], seed=cfg.seed)
        inputs = {INSTRUCTIONS: INSTRUCTIONS, roles.MODEL: src + sfx}
        specs.append(StageSpec(f"instruct_{arm}{sfx}", "instruct", params_i, inputs))
    for arm, src in sources.items():
        specs += _evaluation_stages(cfg, arm, src + sfx, f"instruct_{arm}{sfx}", sfx, label)
    if cfg.evaluate.harness is not None:
        specs += [_harness_stage(cfg, arm, f"instruct_{arm}{sfx}", sfx, label) for arm in sources]
    return specs


def _harness_stage(
    cfg: ActiveForgettingConfig, arm: str, tuned: str, sfx: str, size: str
) -> StageSpec:
    """lm-evaluation-harness on an instruction-tuned model (``evaluate.harness``; Aggarwal et al.
    2024
    Tables 3, 7-11)."""
    h = cfg.evaluate.harness
    assert h is not None
    params = EvaluateHarnessParams(
        label=arm,
        size=size,
        tasks=h.tasks,
        **h.options(),
        dtype=harness_dtype(cfg.evaluate.precision),
        seed=cfg.downstream.sample_seed,
    )
    inputs = {roles.DATA: DATA, roles.MODEL: tuned}
    return StageSpec(f"harness_{arm}{sfx}", "evaluate_harness", params, inputs)


def _evaluation_stages(
    cfg: ActiveForgettingConfig, arm: str, adapted: str, tuned: str, sfx: str, size: str
) -> list[StageSpec]:
    """Table 1-2 on the model before instruction tuning, Table 3 and zero-shot after it."""
    # the test sample is the same for every training seed (downstream.sample_seed)
    d, langs, seed = cfg.downstream, cfg.groups.group_of(), cfg.downstream.sample_seed
    on = {roles.DATA: DATA, roles.MODEL: adapted}
    tuned_on = {roles.DATA: DATA, roles.MODEL: tuned}
    common = {
        "label": arm,
        "precision": cfg.evaluate.precision,
        "size": size,
        "languages": langs,
        "bootstrap": d.bootstrap,
        "seed": seed,
    }
    iso = EvaluateIsotropyParams(
        **common, max_texts_per_lang=d.isotropy_texts, pooling=d.isotropy_pooling
    )
    mt = EvaluateTranslationParams(
        **common,
        shots=d.translation_shots,
        max_texts_per_lang=d.translation_texts,
        max_new_tokens=d.max_new_tokens,
        bleu_tokenize=d.bleu_tokenize,
        bleu_tokenize_by_lang=d.bleu_tokenize_by_lang,
    )
    zs = EvaluateZeroShotParams(
        **common, max_texts_per_lang=d.zero_shot_texts, scoring=d.zero_shot_scoring
    )
    return [
        evaluate_lm_stage(f"lm_{arm}{sfx}", arm, adapted, langs, cfg.evaluate.lm(), size),
        StageSpec(f"isotropy_{arm}{sfx}", "evaluate_isotropy", iso, on),
        StageSpec(f"translation_{arm}{sfx}", "evaluate_translation", mt, tuned_on),
        StageSpec(f"zero_shot_{arm}{sfx}", "evaluate_zero_shot", zs, tuned_on),
    ]


@EXPERIMENTS.register(
    "active_forgetting",
    f"{cite('000')}: Baseline / BA / AFA (active forgetting, vocabulary expansion, "
    "English-only SFT)",
)
class ActiveForgetting(SeededExperiment):
    Config = ActiveForgettingConfig

    @classmethod
    def build_one(cls, cfg: ActiveForgettingConfig) -> list[StageSpec]:
        """The stages of one training seed (``cfg.seed``)."""
        specs = [
            data_stage(cfg.data, cfg.groups.all()),
            tokenizer_stage(cfg.base(), cfg.seed),
            instruction_stage(cfg),
        ]
        for size in cfg.size_list():
            specs += _size_stages(cfg, size)
        return specs

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, ActiveForgettingConfig)
        return write_report(cfg, run_dir)
