"""Protocol ``lifelong``: sequential learning over many languages (Khelli et al. 2025).

A base decoder (the ``language_modeling`` data, tokenizer and pretraining
stages, so it is shared through the cache) is fine-tuned on a labelled task
language after language with the paper's five methods (eqs. 1-6), in several
language orders (section 3.2). After every step every language's test set is
scored, filling the accuracy matrix R; the report computes the paper's
metrics (eqs. 9-14) and the common variants from R, and draws Tables 1-2 and
Figures 2, 3, 5, 6 and 7 plus the language analysis of section 5.
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.continual.config import OrderConfig
from polymnesia.continual.methods import get_method, with_baseline
from polymnesia.experiments.base import EXPERIMENTS, ExperimentConfig
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.experiments.lifelong.keys import arm_key
from polymnesia.experiments.lifelong.report import build_report
from polymnesia.experiments.papers import cite
from polymnesia.experiments.seeds import SeededExperiment
from polymnesia.experiments.shared import DATA, PRETRAIN, base_stages
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages import common as roles
from polymnesia.stages.sequential import BASE, ORDER, PREV, StepParams
from polymnesia.stages.sequential_order import SOURCES, OrderParams


def data_languages(cfg: LifelongConfig) -> list[str]:
    """What the data stage prepares: pretraining, task and pivot languages (or
    ``data_languages``).
    """
    b = cfg.base
    extra = [cfg.task_pivot] if cfg.task_pivot else []
    return b.data_languages or list(dict.fromkeys([*b.languages, *cfg.languages, *extra]))


def _step(
    cfg: LifelongConfig,
    name: str,
    method: str,
    rank: int | None,
    inputs: dict[str, str],
    **kw: object,
) -> StageSpec:
    params = StepParams(
        method=method,
        rank=rank,
        lora=cfg.lora,
        train=with_baseline(method, cfg.step_train(method, rank), PREV in inputs),
        task=cfg.task,
        task_pivot=cfg.task_pivot,
        slot_field=cfg.slot_field,
        languages=cfg.languages,
        train_per_lang=cfg.train_per_lang,
        eval_per_lang=cfg.evaluate.max_texts_per_lang,
        eval_batch_size=cfg.evaluate.batch_size,
        eval_precision=cfg.evaluate.precision,
        bootstrap=cfg.bootstrap,
        seed=cfg.seed,
        replay=cfg.replay if get_method(method).replay else None,
        **kw,
    )
    return StageSpec(name, "sequential_step", params, {roles.DATA: DATA, BASE: PRETRAIN, **inputs})


def order_stage(cfg: LifelongConfig, o: OrderConfig) -> StageSpec:
    key = arm_key(o.source_method, None)
    last = len(cfg.languages) - 1
    inputs = {roles.DATA: DATA, **SOURCES.bind([f"{key}_{s}_{last}" for s in o.sources])}
    params = OrderParams(order=o, languages=cfg.languages, pretraining=cfg.base.languages)
    return StageSpec(f"order_{o.name}", "sequential_order", params, inputs)


@EXPERIMENTS.register(
    "lifelong",
    f"sequential learning over many languages: 5 methods, orders, R matrices ({cite('004')})",
)
class Lifelong(SeededExperiment):
    Config = LifelongConfig

    @classmethod
    def build_one(cls, cfg: LifelongConfig) -> list[StageSpec]:
        """The stages of one training seed (``cfg.seed``)."""
        specs = [
            *base_stages(cfg.base, cfg.data, data_languages(cfg), cfg.seed),
            _step(cfg, "untrained", "vanilla", None, {}, evaluate_only=True, train_languages=[]),
        ]
        for method, rank in cfg.arms():
            sched, key = get_method(method).schedule, arm_key(method, rank)
            if sched == "joint":
                specs.append(_step(cfg, key, method, rank, {}, train_languages=cfg.languages))
            elif sched == "independent":
                specs += [
                    _step(cfg, f"{key}_{lang}", method, rank, {}, train_languages=[lang])
                    for lang in cfg.languages
                ]
        for o in cfg.orders:
            specs.append(order_stage(cfg, o))
            for method, rank in cfg.arms():
                if get_method(method).schedule != "sequential":
                    continue
                key = arm_key(method, rank)
                for k in range(len(cfg.languages)):
                    prev: dict[str, str] = {PREV: f"{key}_{o.name}_{k - 1}"} if k else {}
                    specs.append(
                        _step(
                            cfg,
                            f"{key}_{o.name}_{k}",
                            method,
                            rank,
                            {ORDER: f"order_{o.name}", **prev},
                            order_index=k,
                            setting=o.name,
                        )
                    )
        return specs

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, LifelongConfig)
        return build_report(cfg, run_dir)
