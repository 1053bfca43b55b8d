"""Protocol ``lf_mlf``: multi-lingual fine-tuning with per-language gradients (Mao et al. 2022).

Mao et al. 2022, "Less-Forgetting Multi-Lingual Fine-Tuning", Section 5: a
multilingual model (here: the decoder of the pretraining stage, shared and
cached with ``language_modeling``; or a loaded model such as XLM-R base given
as ``pretrain.model.name_or_path``, imported and fine-tuned as it is) is fine-tuned on a
labelled task in a few source languages with Uniform-MLF, PCGrad, GradVac,
MGDA and LF-MLF, and with single-language fine-tuning (SLF) per source, over
several seeds; reported are zero-shot performance averaged over the target
languages (Tables 1-3), fine-tuning performance per source (Tables 4-6) with
paired t-test marks, the Friedman test and Bonferroni-Dunn CD diagram
(Figure 2, tasks or languages as blocks), the forgetting F_p of the
pretraining objective (Section 3.1: the causal-LM loss of a decoder, the
masked-LM loss of an encoder; measured on the shared data, so not for tasks
that bring their own), and optionally the source-count sweep
(Figures 3-4, R_T) and cross-branch transfer (Figure 5a).

The offline tasks are the Bible verse genre (9 labels) and the constructed
genre tagging and genre questions (docs/lf_mlf.md); the paper's PAN-X,
TyDiQA-GoldP and XNLI are in configs/lf_mlf_paper.yaml (needs the Hub).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from polymnesia.evaluation.config import EvalConfig
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.lf_mlf.config import LFMLFConfig, TaskSection, label_of
from polymnesia.experiments.lf_mlf.report import write_report
from polymnesia.experiments.papers import cite
from polymnesia.experiments.shared import (
    DATA,
    PRETRAIN,
    base_stages,
    data_stage,
    evaluate_lm_stage,
    import_stage,
)
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages import common as roles
from polymnesia.stages.data import PrepareDataParams
from polymnesia.stages.finetune import FORGETTING_DATA as FORGETTING_TEXT
from polymnesia.stages.finetune import FinetuneParams

#: the held-out text of F_p when the config names ``forgetting_data``
FORGETTING_DATA = "data_forgetting"


def measures_fp(cfg: LFMLFConfig, task: TaskSection) -> bool:
    """Whether ``task``'s main arms get F_p: on the shared data, or on ``forgetting_data``."""
    return task.data is None or cfg.forgetting_data is not None


def forgetting_data_stages(cfg: LFMLFConfig) -> list[StageSpec]:
    """``prepare_data`` of ``forgetting_data`` for the F_p languages, when the config names it."""
    if cfg.forgetting_data is None:
        return []
    params = PrepareDataParams(data=cfg.forgetting_data, languages=cfg.forgetting_languages())
    return [StageSpec(FORGETTING_DATA, "prepare_data", params)]


def hub_base(cfg: LFMLFConfig) -> str | None:
    """The loaded model (Hub id or folder) fine-tuned as it is, if the config names one: it is
    imported (``import_model``, named ``pretrain``; an encoder keeps its masked-LM head) instead
    of pretrained."""
    return cfg.pretrain.model.name_or_path


def base_lm_stage(cfg: LFMLFConfig) -> StageSpec:
    """The base model's pre-training loss on held-out text, L_p(theta_p): the reference of F_p.

    A base pretrained here: ``evaluate_lm`` (its perplexity is exp of the causal-LM loss). A
    loaded base: ``pretraining_loss``, the causal-LM loss of a decoder or the masked-LM loss of
    an encoder, as ``finetune_task`` scores the fine-tuned body."""
    e = cfg.evaluate
    evaluate = EvalConfig(
        split="test",
        max_texts_per_lang=e.forgetting_texts,
        batch_size=e.batch_size,
        max_length=e.forgetting_max_length,
        precision=e.precision,  # the same as the fine-tuned models' F_p
    )
    langs = {lang: "forgetting" for lang in cfg.forgetting_languages()}
    kind = "evaluate_lm" if hub_base(cfg) is None else "pretraining_loss"
    data = DATA if cfg.forgetting_data is None else FORGETTING_DATA
    return evaluate_lm_stage("base_lm", "base", PRETRAIN, langs, evaluate, kind=kind, data=data)


def data_name(cfg: LFMLFConfig, task: TaskSection) -> str:
    return DATA if task.data is None else f"{DATA}_{task.name}"


def task_data_stages(cfg: LFMLFConfig) -> list[StageSpec]:
    """One ``prepare_data`` per task that brings its own data (its sources and targets)."""
    out = []
    for t in cfg.task_list():
        if t.data is None:
            continue
        sources = cfg.sources_of(t)
        langs = list(dict.fromkeys([*sources, *cfg.target_langs(sources, t)]))
        params = PrepareDataParams(data=t.data, languages=langs)
        out.append(StageSpec(data_name(cfg, t), "prepare_data", params))
    return out


def finetune_stage(
    cfg: LFMLFConfig,
    task: TaskSection,
    method: str,
    sources: list[str],
    targets: list[str],
    seed: int,
    setting: str,
) -> StageSpec:
    label = f"SLF-{sources[0]}" if method == "slf" else label_of(method)
    measure_fp = setting == "main" and measures_fp(cfg, task)
    params = FinetuneParams(
        label=label,
        method=method,
        method_options=cfg.method_options.get(method, {}),
        sources=sources,
        targets=targets,
        task=task.base(),
        train=cfg.finetune,
        evaluation=cfg.evaluate,
        forgetting_languages=cfg.forgetting_languages() if measure_fp else [],
        seed=seed,
        setting=setting,
    )
    tag = "-".join(sources) if method == "slf" else method
    prefix = f"{task.name}_" if len(cfg.task_list()) > 1 else ""
    inputs = {roles.DATA: data_name(cfg, task), roles.MODEL: PRETRAIN}
    if measure_fp and cfg.forgetting_data is not None:
        inputs[FORGETTING_TEXT] = FORGETTING_DATA  # F_p's texts (default: the "data" input)
    name = f"ft_{setting}_{prefix}{tag}_s{seed}"
    return StageSpec(name, "finetune_task", params, inputs, seeds=[seed])


def arms(
    cfg: LFMLFConfig,
    task: TaskSection,
    methods: list[str],
    sources: list[str],
    targets: list[str],
    setting: str,
    slf: bool,
) -> list[StageSpec]:
    out = []
    for seed in cfg.seeds:
        out += [finetune_stage(cfg, task, m, sources, targets, seed, setting) for m in methods]
        if slf:
            out += [finetune_stage(cfg, task, "slf", [s], targets, seed, setting) for s in sources]
    return out


def base_specs(cfg: LFMLFConfig) -> list[StageSpec]:
    """Data, tokenizer, pretraining and F_p's reference; for a loaded model the data its
    tasks share (with the F_p languages), its import and F_p's reference."""
    fp_data = forgetting_data_stages(cfg)
    if hub_base(cfg) is None:
        specs = [*base_stages(cfg.pretrain, cfg.data, cfg.all_languages(), cfg.seed), *fp_data]
        return [*specs, base_lm_stage(cfg), *task_data_stages(cfg)]
    shared = [t for t in cfg.task_list() if t.data is None]
    if not shared:  # every task brings its own data: F_p only on forgetting_data
        reference = [base_lm_stage(cfg)] if fp_data else []
        return [import_stage(cfg.pretrain), *fp_data, *reference, *task_data_stages(cfg)]
    langs = [
        x for t in shared for x in [*cfg.sources_of(t), *cfg.target_langs(cfg.sources_of(t), t)]
    ]
    fp_langs = [] if fp_data else cfg.forgetting_languages()
    data = data_stage(cfg.data, [*langs, *fp_langs])
    return [data, import_stage(cfg.pretrain), *fp_data, base_lm_stage(cfg), *task_data_stages(cfg)]


def part_specs(cfg: LFMLFConfig, task: TaskSection) -> list[StageSpec]:
    specs = []
    if "main" in cfg.parts:
        sources = cfg.sources_of(task)
        specs += arms(
            cfg, task, cfg.methods, sources, cfg.target_langs(sources, task), "main", cfg.slf
        )
    if cfg.sweep and "sweep" in cfg.parts:
        top = cfg.sweep.ranking[: max(cfg.sweep.counts)]
        targets = cfg.target_langs(top, task)
        for k in cfg.sweep.counts:
            specs += arms(
                cfg, task, cfg.sweep.methods, cfg.sweep.ranking[:k], targets, f"top{k}", False
            )
        specs += arms(cfg, task, [], top, targets, "sweep_slf", True)
    if cfg.branches and "branches" in cfg.parts:
        groups = cfg.branches.groups
        for name, langs in groups.items():
            others = [x for g, ls in groups.items() if g != name for x in ls]
            specs += arms(cfg, task, cfg.branches.methods, langs, others, f"branch_{name}", False)
    return specs


@EXPERIMENTS.register(
    "lf_mlf",
    f"multi-lingual fine-tuning: uniform, PCGrad, GradVac, MGDA, LF-MLF and SLF ({cite('003')})",
)
class LFMLF(Experiment):
    Config = LFMLFConfig

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        assert isinstance(cfg, LFMLFConfig)
        specs = base_specs(cfg)
        for task in cfg.task_list():
            specs += part_specs(cfg, task)
        # the fine-tuning stages are their seed's; the others serve every seed
        return [s if s.seeds else replace(s, seeds=tuple(cfg.seeds)) for s in specs]

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, LFMLFConfig)
        return write_report(cfg, run_dir)
