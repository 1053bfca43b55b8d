"""Stage ``relearn_new_tokens``: one initialisation of the new rows on one base model, scored
at 0 steps and along the relearning of the new rows (issue 26).

Inputs: ``data`` (prepared data), ``model`` (the base model), ``vocabulary`` (a
``static_embeddings`` entry: the merged tokenizer and the side data, shared by every arm).

1. Give the new ids rows and initialise them with ``init``
   (:func:`polymnesia.models.resize.resize_and_init`; the kept head's new rows the
   same way, or a replaced head).
2. Score every metric registered for ``lm`` items (bits per byte, perplexity, word
   perplexity) on each evaluated language's texts (``eval.split``) at step 0, the
   initialisation alone.
3. Train only the new embedding rows and the LM head on the adapting languages
   (``frozen_rows``, as ``adapt_vocabulary`` does) for ``train.steps`` steps, and score again
   after each step count in ``eval_at``.

The per-text likelihoods go to ``items.jsonl`` (kind ``lm``; ``model`` = the base's label,
``setting`` = the initialisation, ``step`` = the step count, ``seed``), so a report pairs
arms text by text; the scores carry their bootstrap intervals. The relearned model is not
kept: this stage's product is the curve. One process (not distributed): the models this
stage is sized for train in minutes.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.errors import DataError
from polymnesia.evaluation.config import EvalConfig
from polymnesia.evaluation.likelihood import lm_items
from polymnesia.io import atomic_write_json
from polymnesia.items import ITEMS_FILE, BootstrapConfig, ItemSet, interval_of, write_items
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.metrics.base import scored_metrics
from polymnesia.models.io import load_model_and_tokenizer
from polymnesia.models.new_tokens import INITS
from polymnesia.models.resize import check_resizable, resize_and_init
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score, with_interval
from polymnesia.runtime import use_cpu
from polymnesia.stages.common import DATA, MODEL, packed_mixture, plugin_inputs, train_in_stage
from polymnesia.stages.static_embeddings import VOCABULARY, SideData, load_side_data
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


#: the scores of each step count
class RelearnParams(StrictModel):
    label: str = Field(description="the base model's name in tables (standard, af, ...)")
    init: str = Field(description="the initialisation of the new rows (polymnesia ls inits)")
    head: Literal["keep", "reinit"] = Field(
        "keep", description="LM head: keep (new rows initialised like the embeddings) or reinit"
    )
    adapting: list[str] = Field(min_length=1, description="languages the new rows relearn on")
    languages: dict[str, str] = Field(description="evaluated language -> group")
    temperature: float = Field(3.0, gt=0, description="language sampling temperature")
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval_at: list[int] = Field(
        description="step counts scored besides 0 and train.steps (each in 1..train.steps)"
    )
    eval: EvalConfig = Field(default_factory=EvalConfig)
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    seed: int = 0

    @field_validator("init")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in INITS:
            raise ValueError(f"unknown init '{v}'; accepted: {', '.join(INITS.names())}")
        return v

    @model_validator(mode="after")
    def _steps(self) -> RelearnParams:
        bad = [s for s in self.eval_at if not 0 <= s <= self.train.steps]
        if bad:
            raise ValueError(
                f"eval_at {bad} outside 0..train.steps ({self.train.steps}); accepted: step counts "
                "up to the relearning's length"
            )
        return self

    def steps(self) -> list[int]:
        """Every step count scored: 0, ``eval_at`` and ``train.steps``, ascending."""
        return sorted({0, *self.eval_at, self.train.steps})


def check_same_base(base: PreTrainedTokenizerBase, side: SideData) -> None:
    """One line unless the merged tokenizer extends the base model's tokenizer."""
    merged = side.merged.get_vocab()
    if any(merged.get(tok) != i for tok, i in base.get_vocab().items()):
        raise DataError(
            "the vocabulary entry's merged tokenizer does not extend this base model's tokenizer; "
            "build static_embeddings from the tokenizer the base model was pretrained with"
        )
    for name, st in (("static", side.static), ("source_static", side.source_static)):
        size = len(side.merged) if name == "static" else len(base)
        if st is not None and st.vectors.shape[0] != size:
            raise DataError(
                f"{name} embeddings of {st.vectors.shape[0]} tokens for a vocabulary of {size}; "
                "rerun static_embeddings"
            )


@STAGES.register(
    "relearn_new_tokens",
    "initialise new-token rows on a base model; bits per byte at 0 steps and along relearning",
)
class RelearnNewTokens(Stage[RelearnParams]):
    category = "training"
    version = "1"
    inputs = (DATA, MODEL, VOCABULARY)
    outputs = (Artifact.ITEMS,)

    @classmethod
    def named_inputs(cls, params: RelearnParams) -> Sequence[str]:
        return plugin_inputs(params.train.plugins)

    def run(self, ctx: StageContext[RelearnParams]) -> list[Score]:
        p = ctx.params
        data = ctx.input(DATA)
        side = load_side_data(ctx.input(VOCABULARY))
        model, base = load_model_and_tokenizer(ctx.input(MODEL) / "model")
        check_resizable(model)
        check_same_base(base, side)
        merged = side.merged
        t = time.perf_counter()
        resize_and_init(
            model,
            merged,
            base,
            side.first_new_id,
            p.init,
            head=p.head,
            seed=p.seed,
            static=side.static,
            alignment=side.alignment,
            source_static=side.source_static,
        )
        init_seconds = time.perf_counter() - t
        if not use_cpu():
            model.to("cuda")  # step 0 is scored before training places the model
        texts = {
            lang: read_texts(data, lang, p.eval.split, p.eval.max_texts_per_lang)
            for lang in p.languages
        }
        missing = [lang for lang, v in texts.items() if not v]
        if missing:
            raise DataError(f"no {p.eval.split} text for {', '.join(missing)} to score")
        sets: list[ItemSet] = []

        def score(m: torch.nn.Module, step: int) -> dict[str, float]:
            was_training = m.training
            m.eval()
            out = {}
            with torch.no_grad():
                for lang, group in p.languages.items():
                    st, cols = lm_items(
                        m,
                        merged,
                        texts[lang],
                        batch_size=p.eval.batch_size,
                        max_length=p.eval.max_length,
                    )
                    sets.append(
                        ItemSet(
                            p.label,
                            lang,
                            "lm",
                            list(range(len(texts[lang]))),
                            cols,
                            group=group,
                            seed=p.seed,
                            step=step,
                            setting=p.init,
                        )
                    )
                    out[f"bpb_{lang}"] = st.bits_per_byte
            m.train(was_training)
            return out

        steps = p.steps()
        score(model, 0)
        result = None
        if p.train.steps > 0 and len(steps) > 1:
            every = math.gcd(*steps[1:])
            cfg = p.train.model_copy(update={"eval_every": every})
            done = [0]

            def at_step(m: torch.nn.Module) -> dict[str, float]:
                done[0] += every
                return score(m, done[0]) if done[0] in steps else {}

            blocks = packed_mixture(
                data,
                merged,
                p.adapting,
                temperature=p.temperature,
                block_size=p.train.block_size,
                seed=p.seed,
            )
            frozen = FrozenRows(first_trainable_row=side.first_new_id)
            done_training = train_in_stage(
                ctx, model, PackedLMData(blocks), cfg, seed=p.seed, before=[frozen], eval_fn=at_step
            )
            model, result = done_training.model, done_training.result
        scores = []
        for s in sets:
            for metric in scored_metrics("lm"):  # every metric registered for lm items
                value = s.statistic(metric).value()
                sc = Score(
                    model=s.model,
                    lang=s.lang,
                    metric=metric,
                    value=value,
                    group=s.group,
                    seed=s.seed,
                    step=s.step,
                    setting=s.setting,
                )
                scores.append(with_interval(sc, interval_of(s, metric, p.bootstrap)))
        if ctx.is_main_process:
            write_items(ctx.out_dir / ITEMS_FILE, sets)
            atomic_write_json(
                ctx.out_dir / "relearn_summary.json",
                {
                    "init": p.init,
                    "head": p.head,
                    "init_seconds": round(init_seconds, 3),
                    "new_tokens": len(merged) - side.first_new_id,
                    "steps_scored": sorted({s.step for s in sets if s.step is not None}),
                    "train_steps": result.steps if result else 0,
                    "final_loss": result.final_loss if result else None,
                    "seconds": round(result.seconds, 2) if result else 0.0,
                },
            )
        return scores
