"""Stage ``evaluate_harness``: lm-evaluation-harness on any model stage's output.

Runs lm-eval (through its own HF model class) on ``ctx.input("model") / "model"``
with the configured task names, few-shot count, limit and batch size, and
returns one :class:`~polymnesia.results.Score` per task and metric (with
lm-eval's standard error). polymnesia's offline tasks (``poly_*``, `polymnesia
ls tasks`) get their documents from the ``data`` input (the ``prepare_data``
stage's Bible split), written into ``task_data/`` in the model's chat format
(its tokenizer's template, or ChatML: the prompts its instruction tuning and
the other evaluation stages use; answers end and generation stops at the
template's end-of-turn marker) with the tasks' YAML for that format; every
other name is an lm-eval task and passes through unchanged (online). lm-eval's JSON output is
kept in ``lm_eval/`` (``results.json``, ``samples_TASK.jsonl``); its per-document values
become ``items.jsonl`` (kind ``docs``, :mod:`polymnesia.harness.items`), and every score that
is their mean gets a bootstrap interval over the documents.

Offline (``offline: true``, or unset with ``HF_HUB_OFFLINE``/``HF_DATASETS_OFFLINE``
set), naming an online-only task fails when the parameters are built, i.e.
before any stage runs, with one line naming the offline tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field, model_validator

from polymnesia.errors import ConfigError
from polymnesia.harness.config import HarnessOptions
from polymnesia.harness.docs import write_task_data
from polymnesia.harness.items import samples_to_items
from polymnesia.harness.run import results_to_scores, run_lm_eval
from polymnesia.harness.tasks import check_tasks, expand
from polymnesia.items import ITEMS_FILE, score_with_items, write_items
from polymnesia.pipeline.stage import STAGES, Artifact, Stage, StageContext
from polymnesia.results import Score
from polymnesia.runtime import Precision, current
from polymnesia.stages.common import DATA, MODEL
from polymnesia.tokenizers.bpe import load_tokenizer

_HARNESS_DTYPE = {"no": "auto", "bf16": "bfloat16", "fp16": "float16"}


def harness_dtype(precision: Precision) -> str:
    """lm-eval's ``dtype`` for an inference precision (``no``: the weights' own, float32)."""
    return _HARNESS_DTYPE[precision]


class EvaluateHarnessParams(HarnessOptions):
    """lm-eval's options (:class:`~polymnesia.harness.config.HarnessOptions`, the section
    every protocol embeds) and what the stage adds: the tasks, the model's label, device,
    dtype and the offline tasks' documents."""

    label: str
    tasks: list[str] = Field(min_length=1)
    device: str | None = None
    dtype: str = "auto"
    add_bos_token: bool | None = True
    fewshot_docs: int = Field(8, ge=0)
    seed: int = 0
    size: str | None = None
    task_langs: dict[str, str] = Field(default_factory=dict)
    bootstrap_iters: int = Field(1000, ge=0)
    log_samples: bool = True

    @model_validator(mode="after")
    def _check(self) -> EvaluateHarnessParams:
        check_tasks(self.tasks, self.is_offline(), verify_online=False)
        return self


@STAGES.register(
    "evaluate_harness",
    "lm-evaluation-harness tasks (offline poly_* or any lm-eval name) on a model stage's output",
)
class EvaluateHarness(Stage[EvaluateHarnessParams]):
    category = "evaluation"
    # 2: poly_* tasks in the model's chat template (was ChatML for every model); 3: documents
    # without the template's BOS (lm-eval adds it once per context, few-shot examples included);
    # 4: a translation task's items keep each document's sentence chrF (harness/items.py)
    version = "4"
    inputs = (MODEL, DATA.optional())
    outputs = (Artifact.ITEMS,)

    @classmethod
    def named_inputs(cls, params: EvaluateHarnessParams) -> Sequence[str]:
        return [DATA] if expand(params.tasks) else []  # the poly_* tasks are built from it

    def run(self, ctx: StageContext[EvaluateHarnessParams]) -> list[Score]:
        p = ctx.params
        model_dir = ctx.input(MODEL) / "model"
        task_data = None
        if expand(p.tasks):
            if DATA not in ctx.inputs:
                raise ConfigError(
                    f"evaluate_harness '{ctx.spec.name}': the poly_* tasks need a 'data' input "
                    "(the prepare_data stage of the bible source)"
                )
            task_data = ctx.out_dir / "task_data"
            write_task_data(
                ctx.input(DATA),
                task_data,
                p.tasks,
                n=p.docs_per_task,
                n_fewshot=p.fewshot_docs,
                seed=p.seed,
                tokenizer=load_tokenizer(str(model_dir)),
            )
        results = run_lm_eval(
            model_dir,
            p.tasks,
            ctx.out_dir / "lm_eval",
            task_data=task_data,
            num_fewshot=p.num_fewshot,
            limit=p.limit,
            batch_size=p.batch_size,
            device=p.device or str(current(sharded=False).device),
            dtype=p.dtype,
            add_bos_token=p.add_bos_token,
            seed=p.seed,
            log_samples=p.log_samples,
            bootstrap_iters=p.bootstrap_iters,
            max_gen_toks=p.max_gen_toks,
        )
        fields: dict[str, Any] = {"size": p.size, "seed": p.seed}
        scores = results_to_scores(results, p.label, task_langs=p.task_langs, **fields)
        sets = {
            s.task: s for s in samples_to_items(results, p.label, task_langs=p.task_langs, **fields)
        }
        if sets:  # a bootstrap interval over its documents for every score that is their mean
            write_items(ctx.out_dir / ITEMS_FILE, list(sets.values()))
            scores = [
                score_with_items(s, sets[s.task])
                if s.task in sets and s.metric in sets[s.task].columns
                else s
                for s in scores
            ]
        return scores
