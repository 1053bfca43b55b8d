"""Protocol ``new_token_init``: how the rows of new tokens start, and how fast they relearn,
on base models pretrained with and without active forgetting (issue 26).

* ``data``, ``tokenizer``: the prepared data and the base tokenizer, shared;
* ``vocabulary`` (``static_embeddings``): the adapting vocabulary merged into the base one,
  and the side data the chosen initialisations need (static embeddings, alignments), computed
  once for every base and every initialisation;
* ``pretrain_BASE``: each base model (``bases``): standard pretraining, or pretraining with
  active forgetting (Aggarwal et al. 2024);
* ``relearn_BASE_INIT`` (``relearn_new_tokens``): the base's vocabulary expanded with the new
  rows initialised by INIT, scored at 0 steps and after each step count of relearning the new
  rows and the head (body and old rows frozen).

The report: a table per step count (bits per byte per language and group, intervals, paired
differences against ``mean``), a figure of bits per byte against steps with a panel per base,
and the claims (``claims.py``).
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.base import EXPERIMENTS, ExperimentConfig
from polymnesia.experiments.new_token_init.config import BaseArm, NewTokenInitConfig
from polymnesia.experiments.new_token_init.report import write_report
from polymnesia.experiments.seeds import SeededExperiment
from polymnesia.experiments.shared import (
    DATA,
    TOKENIZER,
    data_stage,
    pretrain_stage,
    tokenizer_stage,
)
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages import common as roles
from polymnesia.stages import static_embeddings
from polymnesia.stages.relearn_new_tokens import RelearnParams
from polymnesia.stages.static_embeddings import StaticEmbeddingsParams, needs_of

VOCABULARY = "vocabulary"


def pretrain_name(arm: BaseArm) -> str:
    return f"pretrain_{arm.name}"


def relearn_name(arm: BaseArm, init: str) -> str:
    return f"relearn_{arm.name}_{init}"


def seed_stages(cfg: NewTokenInitConfig) -> list[StageSpec]:
    """The stages of one training seed (``cfg.seed``)."""
    base, r = cfg.base(), cfg.relearn
    side = StaticEmbeddingsParams(
        vocabulary=r.vocabulary,
        adapting=cfg.groups.adapting,
        pretraining=cfg.groups.pretraining,
        temperature=cfg.tokenizer.temperature,
        min_frequency=cfg.tokenizer.min_frequency,
        needs=needs_of(r.inits),
        seed=cfg.seed,
    )
    specs = [
        data_stage(cfg.data, cfg.groups.all()),
        tokenizer_stage(base, cfg.seed),
        StageSpec(
            VOCABULARY, "static_embeddings", side, {roles.DATA: DATA, roles.TOKENIZER: TOKENIZER}
        ),
    ]
    for arm in cfg.bases:
        specs.append(
            pretrain_stage(base, cfg.seed, name=pretrain_name(arm), train=cfg.base_train(arm))
        )
        for init in r.inits:
            params = RelearnParams(
                label=arm.name,
                init=init,
                head=r.head,
                adapting=cfg.groups.adapting,
                languages=cfg.groups.group_of(),
                temperature=cfg.tokenizer.temperature,
                train=r.train,
                eval_at=r.eval_steps(),
                eval=cfg.evaluate,
                bootstrap=cfg.bootstrap,
                seed=cfg.seed,
            )
            inputs = {
                roles.DATA: DATA,
                roles.MODEL: pretrain_name(arm),
                static_embeddings.VOCABULARY: VOCABULARY,
            }
            specs.append(StageSpec(relearn_name(arm, init), "relearn_new_tokens", params, inputs))
    return specs


@EXPERIMENTS.register(
    "new_token_init",
    "new-token initialisations x base models (active forgetting), relearning curves",
)
class NewTokenInit(SeededExperiment):
    Config = NewTokenInitConfig

    @classmethod
    def build_one(cls, cfg: NewTokenInitConfig) -> list[StageSpec]:
        return seed_stages(cfg)

    @classmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        assert isinstance(cfg, NewTokenInitConfig)
        return write_report(cfg, run_dir)
