"""Protocol ``two_phase``: two-phase continual instruction fine-tuning (the two-phase CFT paper).

A base decoder (the shared data, tokenizer and pretraining stages, or an
imported model) is instruction-tuned end to end on an English set (Phase 1),
then on a multilingual set (Phase 2) without access to the Phase 1 data: the
Phase 2 set shares no verse with Phase 1 and no stage of Phase 2 reads it.
Arms, for every listed pair of phase-wise sets: CFT (Phase 1 then Phase 2), the
single-phase mixture of the same pair with as many steps as both phases, and
an off-the-shelf Phase 1 model when ``instruct_model`` is set (the paper's
"Instruct" rows). Mitigations for one pair (Table 5): generative and English
replay, layer freezing (LF_H1 random, LF_H2 most changed from the base, Spectrum)
and the LoRA baseline; forgetting baselines (issue 27): L2-SP, EWC, LwF distillation
and merges of Phase 1 with CFT. EWC's Fisher is estimated at the end of Phase 1 on the
Phase 1 data (a ``fisher`` stage), as EWC prescribes; its Phase 2 reads only the Fisher.
Every model is scored on English (EA) and multilingual (MA) tasks through
lm-evaluation-harness; DES and MPD measure the pairs' similarity (Tables 3-4) and a drift
stage the change of English representations
(Figures 1-2).
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.base import EXPERIMENTS, ExperimentConfig
from polymnesia.experiments.papers import cite
from polymnesia.experiments.seeds import SeededExperiment
from polymnesia.experiments.shared import DATA, PRETRAIN, base_stages
from polymnesia.experiments.two_phase.config import (
    EWC_FISHER,
    INSTRUCT,
    MERGE,
    BaselineArm,
    PairConfig,
    TwoPhaseConfig,
)
from polymnesia.experiments.two_phase.report import write_report
from polymnesia.experiments.two_phase.roles import (
    cft_stage,
    eval_stage,
    evaluated_models,
    mitigation_arms,
    mix_stage,
    p1_stage,
    set_stage,
    single_stage,
)
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages import common as roles
from polymnesia.stages.drift import REFERENCE, DriftParams
from polymnesia.stages.evaluate_harness import EvaluateHarnessParams, harness_dtype
from polymnesia.stages.fisher import FisherParams
from polymnesia.stages.import_model import ImportModelParams
from polymnesia.stages.instruct import RECORDS, InstructConfig, InstructParams
from polymnesia.stages.instruction_data import EXCLUDES, OF, InstructionDataParams
from polymnesia.stages.merge import BASE as MERGE_BASE
from polymnesia.stages.merge import MergeParams
from polymnesia.stages.replay_data import PHASE2, POOL, ReplayConfig, ReplayDataParams
from polymnesia.stages.similarity import (
    MODEL_A,
    MODEL_B,
    SET_A,
    SET_B,
    DatasetSimilarityParams,
    ModelDistanceParams,
)
from polymnesia.training.config import TrainConfig
from polymnesia.training.plugins import FisherEstimate


def data_languages(cfg: TwoPhaseConfig) -> list[str]:
    """Pretraining languages, English and every instruction set's languages."""
    langs = [*cfg.base.languages, "en"]
    for s in cfg.sets.values():
        langs += s.languages
    return list(dict.fromkeys(langs))


def _set_stages(cfg: TwoPhaseConfig) -> list[StageSpec]:
    specs = []
    for name, s in cfg.sets.items():
        inputs: dict[str, str] = {roles.DATA: DATA}
        phase1s = sorted({p.phase1 for p in cfg.pairs if p.phase2 == name and p.phase1 != INSTRUCT})
        inputs.update(EXCLUDES.bind([set_stage(x) for x in phase1s]))
        if s.of is not None:
            inputs[OF] = set_stage(s.of)
        params = InstructionDataParams(name=name, set=s, seed=cfg.seed)
        specs.append(StageSpec(set_stage(name), "instruction_data", params, inputs))
    return specs


def _tune(
    cfg: TwoPhaseConfig,
    name: str,
    start: str,
    records: list[str],
    train: TrainConfig,
    *,
    lora_rank: int | None = None,
    extra_inputs: dict[str, str] | None = None,
) -> StageSpec:
    """An ``instruct`` stage: ``start``'s model tuned on the ``records`` sets' stages."""
    icfg = InstructConfig(
        max_length=cfg.max_length, train=train, lora_rank=lora_rank, too_long="drop"
    )
    sets = RECORDS.bind(records)
    params = InstructParams(instruct=icfg, records=list(sets), seed=cfg.seed)
    inputs = {roles.MODEL: start, **sets, **(extra_inputs or {})}
    return StageSpec(name, "instruct", params, inputs)


def _phase_stages(cfg: TwoPhaseConfig) -> list[StageSpec]:
    specs: list[StageSpec] = []
    if cfg.instruct_model is not None:
        imported = ImportModelParams(
            model=cfg.base.model.model_copy(update={"name_or_path": cfg.instruct_model})
        )
        specs.append(StageSpec(p1_stage(INSTRUCT), "import_model", imported))
    for name in dict.fromkeys(p.phase1 for p in cfg.pairs if p.phase1 != INSTRUCT):
        specs.append(_tune(cfg, p1_stage(name), PRETRAIN, [set_stage(name)], cfg.phase1))
    for name in dict.fromkeys(p.phase2 for p in cfg.pairs):  # base + D2 alone: MPD (Table 4)
        # on its own set with its own (Phase 2) schedule, as the paper tunes every model
        specs.append(_tune(cfg, single_stage(name), PRETRAIN, [set_stage(name)], cfg.phase2))
    for pair in cfg.pairs:
        specs.append(
            _tune(cfg, cft_stage(pair), p1_stage(pair.phase1), [set_stage(pair.phase2)], cfg.phase2)
        )
        if cfg.mixture and pair.phase1 != INSTRUCT:
            sets = [set_stage(pair.phase1), set_stage(pair.phase2)]
            specs.append(_tune(cfg, mix_stage(pair), PRETRAIN, sets, cfg.mixture_train()))
    return specs


def _mitigation_stages(cfg: TwoPhaseConfig) -> list[StageSpec]:
    m = cfg.mitigation
    if m is None:
        return []
    pair = cfg.pairs[m.pair]
    p1, p2 = p1_stage(pair.phase1), set_stage(pair.phase2)
    specs: list[StageSpec] = []
    for arm in m.replay:
        replay = ReplayConfig(**arm.model_dump(exclude={"name"}))
        params = ReplayDataParams(replay=replay, precision=cfg.evaluate.precision, seed=cfg.seed)
        inputs: dict[str, str] = {PHASE2: p2, POOL: set_stage(m.pool), roles.MODEL: p1}
        specs.append(StageSpec(f"replay_{arm.name}", "replay_data", params, inputs))
        specs.append(_tune(cfg, f"mit_{arm.name}", p1, [f"replay_{arm.name}"], cfg.phase2))
    for f in m.freezing:
        extra = {name: PRETRAIN for name in f.models()}  # base: the pretrained model
        train = cfg.phase2.with_plugins(f.plugin())
        specs.append(_tune(cfg, f"mit_{f.name}", p1, [p2], train, extra_inputs=extra))
    if m.lora_rank is not None:
        specs.append(_tune(cfg, "mit_LoRA", p1, [p2], cfg.phase2, lora_rank=m.lora_rank))
    for b in m.baselines:  # forgetting baselines (issue 27): from the Phase 1 model, like CFT
        if b.method == MERGE:  # Phase 1 and plain CFT merged; task vectors from the base
            merge = MergeParams.model_validate(b.options)
            inputs = roles.MODELS.bind([p1, cft_stage(pair)])
            inputs |= {MERGE_BASE: PRETRAIN} if merge.method != "average" else {}
            specs.append(StageSpec(f"mit_{b.name}", "merge_models", merge, inputs))
            continue
        fisher_input: dict[str, str] = {}
        fisher = b.fisher()
        if fisher is not None:  # EWC: anchored at the Phase 1 model, weighted by its Fisher
            specs.append(_fisher_stage(cfg, b, fisher, p1, set_stage(pair.phase1)))
            fisher_input = {EWC_FISHER: f"fisher_{b.name}"}
        train = cfg.phase2.with_plugins(b.plugin())
        specs.append(_tune(cfg, f"mit_{b.name}", p1, [p2], train, extra_inputs=fisher_input))
    return specs


def _fisher_stage(
    cfg: TwoPhaseConfig, arm: BaselineArm, fisher: FisherEstimate, p1: str, data: str
) -> StageSpec:
    """A baseline arm's ``fisher`` stage (EWC's): the Phase 1 model's diagonal empirical
    Fisher on the Phase 1 set, as many examples and per batch as the arm's plugin says."""
    sets = RECORDS.bind([data])
    params = FisherParams(
        records=list(sets),
        examples=fisher.examples,
        batch_size=fisher.batch_size,
        max_length=cfg.max_length,
        precision=cfg.evaluate.precision,
        seed=cfg.seed,
    )
    return StageSpec(f"fisher_{arm.name}", "fisher", params, {roles.MODEL: p1, **sets})


def _evaluation_stages(cfg: TwoPhaseConfig) -> list[StageSpec]:
    e, h = cfg.evaluate, cfg.evaluate.harness
    specs = []
    for stage, label in evaluated_models(cfg).items():
        params = EvaluateHarnessParams(
            label=label,
            tasks=[*h.english, *h.multilingual],
            **h.options(),
            dtype=harness_dtype(e.precision),
            seed=cfg.seed,
        )
        specs.append(
            StageSpec(
                eval_stage(stage),
                "evaluate_harness",
                params,
                {roles.DATA: DATA, roles.MODEL: stage},
            )
        )
    return specs


def _analysis_stages(cfg: TwoPhaseConfig) -> list[StageSpec]:
    specs = []
    for pair in cfg.pairs:
        label = f"{pair.phase1} -> {pair.phase2}"
        if pair.phase1 != INSTRUCT:
            des = DatasetSimilarityParams(
                label=label,
                similarity=cfg.similarity,
                precision=cfg.evaluate.precision,
                seed=cfg.seed,
            )
            ab = {SET_A: set_stage(pair.phase1), SET_B: set_stage(pair.phase2)}
            if cfg.similarity.embedder == "hidden":  # the base model's mean last hidden state
                ab[roles.MODEL] = PRETRAIN
            specs.append(StageSpec(f"des_{pair.key}", "dataset_similarity", des, ab))
        mpd = ModelDistanceParams(label=f"{pair.phase2} vs {pair.phase1}")
        ab = {MODEL_A: single_stage(pair.phase2), MODEL_B: p1_stage(pair.phase1)}
        specs.append(StageSpec(f"mpd_{pair.key}", "model_distance", mpd, ab))
        models = [cft_stage(pair), PRETRAIN]
        labels = [f"P2 ({label})", "base"]
        m = cfg.mitigation
        if m is not None and cfg.pairs[m.pair] == pair:  # every arm, baselines included
            arms = mitigation_arms(cfg)
            models += list(arms)
            labels += list(arms.values())
        drift = DriftParams(
            drift=cfg.drift,
            reference_label=f"P1 {pair.phase1}",
            labels=labels,
            precision=cfg.evaluate.precision,
            seed=cfg.seed,
        )
        inputs = {roles.DATA: DATA, REFERENCE: p1_stage(pair.phase1), **roles.MODELS.bind(models)}
        specs.append(StageSpec(f"drift_{pair.key}", "representation_drift", drift, inputs))
    return specs


@EXPERIMENTS.register(
    "two_phase",
    f"{cite('002')}: English then multilingual instruction tuning vs mixture, similarity, drift, "
    "mitigations, baselines (L2-SP, EWC, LwF, merging)",
)
class TwoPhase(SeededExperiment):
    Config = TwoPhaseConfig

    @classmethod
    def build_one(cls, cfg: TwoPhaseConfig) -> list[StageSpec]:
        """The stages of one training seed (``cfg.seed``)."""
        return [
            *base_stages(cfg.base, cfg.data, data_languages(cfg), cfg.seed),
            *_set_stages(cfg),
            *_phase_stages(cfg),
            *_mitigation_stages(cfg),
            *_evaluation_stages(cfg),
            *_analysis_stages(cfg),
        ]

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, TwoPhaseConfig)
        return write_report(cfg, run_dir)


__all__ = ["PairConfig", "TwoPhase"]
