"""Protocol ``lf_mlf``: multi-lingual fine-tuning with per-language gradients (paper 003).

Mao et al. 2022, "Less-Forgetting Multi-Lingual Fine-Tuning", Section 5: a
multilingual model (here: the decoder of the pretraining stage, shared and
cached with ``language_modeling``) is fine-tuned on a labelled task in a few
source languages with Uniform-MLF, PCGrad, GradVac, MGDA and LF-MLF, and with
single-language fine-tuning (SLF) per source, over several seeds; reported are
zero-shot performance averaged over the target languages (Tables 1-3),
fine-tuning performance per source (Tables 4-6) with paired t-test marks, the
Friedman test and Bonferroni-Dunn CD diagram (Figure 2), the forgetting F_p of
the pretraining objective (Section 3.2), and optionally the source-count sweep
(Figures 3-4, R_T) and cross-branch transfer (Figure 5a).

The offline task is the Bible verse genre (9 labels); XLM-R and WikiANN/XNLI
are replaced by a tiny decoder and the Bible: see docs/lf_mlf.md.
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.evaluation.config import EvalConfig
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.lf_mlf.config import LFMLFConfig, label_of
from polymnesia.experiments.lf_mlf.report import write_report
from polymnesia.experiments.shared import DATA, PRETRAIN, base_stages, evaluate_lm_stage
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages.finetune import FinetuneParams


def base_lm_stage(cfg: LFMLFConfig) -> StageSpec:
    """The base model's LM loss on held-out text: the reference of F_p."""
    e = cfg.evaluation
    evaluate = EvalConfig(
        split="test",
        max_texts_per_lang=e.forgetting_texts,
        batch_size=e.batch_size,
        max_length=e.forgetting_max_length,
    )
    langs = {lang: "forgetting" for lang in cfg.forgetting_languages()}
    return evaluate_lm_stage("base_lm", "base", PRETRAIN, langs, evaluate)


def finetune_stage(
    cfg: LFMLFConfig, method: str, sources: list[str], targets: list[str], seed: int, setting: str
) -> StageSpec:
    label = f"SLF-{sources[0]}" if method == "slf" else label_of(method)
    params = FinetuneParams(
        label=label,
        method=method,
        method_options=cfg.method_options.get(method, {}),
        sources=sources,
        targets=targets,
        task=cfg.task,
        train=cfg.finetune,
        evaluation=cfg.evaluation,
        forgetting_languages=cfg.forgetting_languages() if setting == "main" else [],
        seed=seed,
        setting=setting,
    )
    tag = "-".join(sources) if method == "slf" else method
    return StageSpec(
        f"ft_{setting}_{tag}_s{seed}", "finetune_task", params, {"data": DATA, "model": PRETRAIN}
    )


def arms(
    cfg: LFMLFConfig,
    methods: list[str],
    sources: list[str],
    targets: list[str],
    setting: str,
    slf: bool,
) -> list[StageSpec]:
    out = []
    for seed in cfg.seeds:
        out += [finetune_stage(cfg, m, sources, targets, seed, setting) for m in methods]
        if slf:
            out += [finetune_stage(cfg, "slf", [s], targets, seed, setting) for s in sources]
    return out


@EXPERIMENTS.register(
    "lf_mlf",
    "multi-lingual fine-tuning: uniform, PCGrad, GradVac, MGDA, LF-MLF and SLF (paper 003)",
)
class LFMLF(Experiment):
    Config = LFMLFConfig

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        assert isinstance(cfg, LFMLFConfig)
        specs = [*base_stages(cfg.pretrain, cfg.data, cfg.all_languages(), cfg.seed)]
        specs.append(base_lm_stage(cfg))
        if "main" in cfg.parts:
            specs += arms(
                cfg, cfg.methods, cfg.sources, cfg.target_langs(cfg.sources), "main", cfg.slf
            )
        if cfg.sweep and "sweep" in cfg.parts:
            top = cfg.sweep.ranking[: max(cfg.sweep.counts)]
            targets = cfg.target_langs(top)
            for k in cfg.sweep.counts:
                specs += arms(
                    cfg, cfg.sweep.methods, cfg.sweep.ranking[:k], targets, f"top{k}", False
                )
            specs += arms(cfg, [], top, targets, "sweep_slf", True)
        if cfg.branches and "branches" in cfg.parts:
            groups = cfg.branches.groups
            for name, langs in groups.items():
                others = [x for g, ls in groups.items() if g != name for x in ls]
                specs += arms(cfg, cfg.branches.methods, langs, others, f"branch_{name}", False)
        return specs

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, LFMLFConfig)
        return write_report(cfg, run_dir)
