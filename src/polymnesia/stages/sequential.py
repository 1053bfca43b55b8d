"""Stage ``sequential_step``: train one model/adapter on one language (or all), then score every
language.

One stage per training step of Khelli et al. 2025's protocol: step ``k`` of a
sequential method (VANILLA eq. 4, SHARED LoRA eq. 5) starts from the model or
adapter of step ``k-1`` (input ``prev``) and trains on the ``k``-th language
of its order (input ``order``); MONO (eqs. 2-3) and NON-SHARED LoRA (eq. 6)
train each language from the base; MULTI (eq. 1) trains on all languages at
once. Every step then scores the test split of every task language in one
batched pass, which is row ``k`` of the accuracy matrix R; ``matrix.json``
holds all rows so far. Because each step is its own cache entry, a run
interrupted at language ``k`` resumes at ``k`` with rows ``0..k-1`` kept.

Each score carries a percentile bootstrap interval over the language's test
examples; predictions and gold labels are kept in ``items.jsonl``.

Training: the shared loop with the step's ``train`` settings
(:class:`~polymnesia.training.config.EpochTrainConfig`: AdamW, by default at a
constant learning rate, as the paper gives no schedule), for at most
``early_stopping.max_epochs`` epochs, stopped on the validation score of the
languages being trained (:mod:`polymnesia.methods.early_stopping`), best epoch
restored.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from pydantic import Field, model_validator

from polymnesia.config.base import FINGERPRINTED_UNLESS_DEFAULT, StrictModel, fingerprinted_as
from polymnesia.continual.examples import load_examples, num_labels, slot_tags
from polymnesia.continual.methods import arm_label, get_method
from polymnesia.continual.replay import (
    BUFFER_FILE,
    ReplayBufferConfig,
    add_language,
    read_buffer,
    replay_count,
    replayed_examples,
    write_buffer,
)
from polymnesia.errors import ConfigError
from polymnesia.evaluation.config import InferencePrecision, precision_field
from polymnesia.evaluation.inference import place_for_inference
from polymnesia.io import atomic_dir, atomic_write_json
from polymnesia.items import ITEMS_FILE, BootstrapConfig, ItemSet, score_with_items, write_items
from polymnesia.methods.early_stopping import EarlyStopping
from polymnesia.methods.regularization import EWC
from polymnesia.methods.step_merge import STEP_MERGE_PLUGINS, StepMerge
from polymnesia.models.build import save_pretrained
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.models.lora import (
    LoraConfig,
    add_adapter,
    load_adapter,
    merge_adapter,
    trainable_parameters,
)
from polymnesia.penalties.fisher import FISHER_FILE, diagonal_fisher, online_fisher, save_fisher
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA, plugin_inputs, train_in_stage
from polymnesia.stages.sequential_order import MatrixRecord, read_matrix, read_order
from polymnesia.tasks.classification import (
    ClassificationData,
    evaluate_by_language,
    evaluate_items_by_language,
    load_classifier,
    make_bidirectional,
)
from polymnesia.tasks.config import TaskConfig
from polymnesia.training.config import EpochTrainConfig

#: the model a fresh classifier is built on (the pretraining stage)
BASE = Role("base", Artifact.MODEL)
#: the previous step of a sequential arm: its classifier (or adapter) and R so far
PREV = Role("prev", Artifact.MATRIX, required=False)
#: the language order a sequential step takes its language from
ORDER = Role("order", Artifact.ORDER, required=False)
#: a LoRA step's adapter folder in its entry (PEFT's ``save_pretrained``, head included)
ADAPTER = "adapter"


class StepParams(StrictModel):
    method: str = Field(description="multi, mono, vanilla, shared_lora or nonshared_lora")
    rank: int | None = Field(None, description="LoRA rank; null: full fine-tuning")
    lora: LoraConfig = Field(default_factory=LoraConfig)
    train: EpochTrainConfig = Field(
        description="optimisation of the step (the arm's preset with its baseline's plugin)",
        json_schema_extra=fingerprinted_as("hyper"),
    )
    task: TaskConfig
    task_pivot: str | None = None
    slot_field: str | None = Field(
        None, description="token task: the meta field with slot annotations (MASSIVE annot_utt)"
    )
    languages: list[str] = Field(
        description="the task languages, scored after the step (R columns)"
    )
    train_languages: list[str] | None = Field(
        None, description="trained languages; null: the order's language at order_index"
    )
    order_index: int | None = None
    setting: str | None = Field(None, description="the order's name (sequential methods)")
    evaluate_only: bool = Field(False, description="score the untrained classifier (FWT baseline)")
    train_per_lang: int | None = None
    eval_per_lang: int | None = None
    eval_batch_size: int = 64
    eval_precision: InferencePrecision = precision_field()
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    seed: int = 0
    replay: ReplayBufferConfig | None = Field(
        None,
        description="the replay arm's buffer (continual.replay); null: no replay",
        json_schema_extra=FINGERPRINTED_UNLESS_DEFAULT,
    )

    @model_validator(mode="after")
    def _step_merge(self) -> StepParams:
        """One line (a ConfigError, not wrapped by pydantic) for a step that would merge twice
        or merge a LoRA adapter."""
        merges = _step_merge_specs(self)
        if len(merges) > 1:
            raise ConfigError(
                f"{self.method}: the plugins {' and '.join(merges)} both merge the step with the "
                "previous one; list at most one"
            )
        if merges and get_method(self.method).uses_lora(self.rank):
            raise ConfigError(
                f"{self.method}: the plugin {merges[0]} merges whole models, and this arm trains "
                f"a LoRA adapter (rank {self.rank}); use it with full fine-tuning"
            )
        return self


def _tags(ctx: StageContext, p: StepParams) -> tuple[str, ...] | None:
    """The slot tag names (label ids in order) of a slot-filling task, else None."""
    if p.task.kind != "token" or p.slot_field is None:
        return None
    return slot_tags(ctx.input(DATA), p.languages, p.slot_field)


def _examples(
    ctx: StageContext, p: StepParams, tok: Any, langs: list[str], split: str, cap: int | None
) -> dict[str, list[dict[str, Any]]]:
    tags = _tags(ctx, p)
    slots = (p.slot_field, tags) if p.slot_field is not None and tags is not None else None
    return {
        lang: load_examples(
            ctx.input(DATA),
            lang,
            split,
            p.task,
            tok,
            cap=cap,
            seed=p.seed,
            pivot=p.task_pivot,
            slots=slots,
        )
        for lang in langs
    }


def _build_model(
    ctx: StageContext, p: StepParams, n_labels: int
) -> tuple[torch.nn.Module, Any, dict[str, torch.Tensor] | None]:
    """The classifier to train: from ``prev`` (sequential) or the base with a fresh head/adapter;
    and where a step merge against the base (``merge_ta``, ``merge_ties``) follows a previous
    step, a CPU copy of the base with that fresh head (the model the arm's first step started
    from), else None."""
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    bidirectional = p.task.context == "bidirectional"
    model, tok = load_classifier(
        ctx.input(BASE), n_labels, p.task.kind, seed=p.seed + 1234, bidirectional=bidirectional
    )
    lora = get_method(p.method).uses_lora(p.rank)
    prev = ctx.inputs.get(PREV)
    if lora and p.rank is not None:
        if prev is not None:
            return load_adapter(model, prev / ADAPTER), tok, None
        return add_adapter(model, p.rank, p.lora, p.task.kind), tok, None
    merging = prev is not None and not p.evaluate_only
    against_base = merging and any(STEP_MERGE_PLUGINS[n].needs_base for n in _step_merge_specs(p))
    base = _start_state(model) if against_base else None
    if prev is not None:  # the previous step's whole classifier, head included
        auto = (
            AutoModelForSequenceClassification
            if p.task.kind == "sequence"
            else AutoModelForTokenClassification
        )
        model = auto.from_pretrained(str(prev / "model"))
        model.config.pad_token_id = tok.pad_token_id
        if bidirectional:
            make_bidirectional(model)
    return model, tok, base


def _step_merge_specs(p: StepParams) -> list[str]:
    """The step-merge plugins (``merge_average``, ``merge_ta``, ``merge_ties``) among the step's
    plugins."""
    return [s.plugin_name for s in p.train.plugins if issubclass(s.plugin_class, StepMerge)]


def _train(
    ctx: StageContext,
    p: StepParams,
    model: torch.nn.Module,
    tok: Any,
    langs: list[str],
    base: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    own = _examples(ctx, p, tok, langs, "train", p.train_per_lang)
    train_ex = [e for ex in own.values() for e in ex]
    replayed = _replay(ctx, p, tok, own, len(train_ex))
    train_ex += [e for _, e in replayed]
    val = _examples(ctx, p, tok, langs, "validation", p.eval_per_lang)
    h = p.train
    batch = min(h.batch_size, len(train_ex))
    spe = max(1, len(train_ex) // batch)

    def score(m: torch.nn.Module) -> float:
        s = evaluate_by_language(
            m,
            val,
            kind=p.task.kind,
            metric=p.task.metric,
            batch_size=p.eval_batch_size,
            tag_names=_tags(ctx, p),
        )
        return sum(s.values()) / len(s)

    stopper = EarlyStopping(h.early_stopping, spe, score)
    cfg = h.loop_config(spe, batch)
    t0 = time.time()
    data = ClassificationData(train_ex, tok.pad_token_id)
    done = train_in_stage(ctx, model, data, cfg, seed=p.seed, plugins=h.plugins, before=[stopper])
    model, result = done.model, done.result
    stopper.restore_best(model)
    for ewc in (q for q in done.plugins if isinstance(q, EWC)):
        _fisher(ctx, model, data, ewc)
    merged = _merge_with_previous(model, base, done.plugins, PREV in ctx.inputs)
    shutil.rmtree(ctx.out_dir / "checkpoints", ignore_errors=True)
    return model, {
        **stopper.summary(),
        "steps": result.steps,
        "engine": result.engine,
        "train_examples": len(train_ex),
        "train_seconds": round(time.time() - t0, 3),
        "train_examples_seen": result.steps * batch,
        "train_loss": result.final_loss,
        **({"replayed": dict(Counter(lang for lang, _ in replayed))} if p.replay else {}),
        **({"merged_with_previous": merged} if merged is not None else {}),
    }


def _merge_with_previous(
    model: torch.nn.Module,
    base: dict[str, torch.Tensor] | None,
    plugins: Sequence[object],
    has_prev: bool,
) -> dict[str, Any] | None:
    """MERGE, MERGE-TA, MERGE-TIES: the trained (best-epoch) weights merged, tensor by tensor,
    with the step's start (the previous step's model; against ``base`` for a rule that needs
    it); what was done, or None (no step-merge plugin, or a first step: nothing to merge
    with)."""
    merger = next((q for q in plugins if isinstance(q, StepMerge)), None)
    if merger is None or not has_prev:
        return None
    merger.merge_into(model, base)
    return merger.options()


def _replay(
    ctx: StageContext,
    p: StepParams,
    tok: Any,
    own: dict[str, list[dict[str, Any]]],
    n_own: int,
) -> list[tuple[str, dict[str, Any]]]:
    """REPLAY: examples drawn from the previous step's buffer to mix into this step's
    training set, and this step's buffer (with its own languages added) for the next."""
    if p.replay is None:
        return []
    buffer = read_buffer(ctx.inputs.get(PREV), p.replay)
    drawn = replayed_examples(
        buffer,
        replay_count(n_own, p.replay.share),
        lambda lang: _examples(ctx, p, tok, [lang], "train", p.train_per_lang)[lang],
        p.seed,
        p.order_index or 0,
    )
    for lang, examples in own.items():
        buffer = add_language(buffer, lang, len(examples), p.replay, p.seed)
    write_buffer(ctx.out_dir / BUFFER_FILE, buffer, p.replay)
    return drawn


def _fisher(ctx: StageContext, model: torch.nn.Module, data: ClassificationData, ewc: EWC) -> None:
    """EWC: the diagonal empirical Fisher of this step's training data at its final weights,
    folded into the previous step's running Fisher (online EWC, ``gamma``), for the next
    step (``fisher.safetensors`` beside ``model/``)."""
    n = min(len(data), ewc.fisher_examples)
    size = ewc.fisher_batch_size
    device = next(model.parameters()).device
    batches = (
        {k: v.to(device) for k, v in data.collate(range(i, min(i + size, n))).items()}
        for i in range(0, n, size)
    )
    fisher = online_fisher(ewc.fisher, diagonal_fisher(model, batches), ewc.gamma)
    save_fisher(ctx.out_dir / FISHER_FILE, fisher)


def _start_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``model``'s weights on the CPU (the base of MERGE-TA and MERGE-TIES)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _save(ctx: StageContext, p: StepParams, model: torch.nn.Module, tok: Any) -> None:
    if get_method(p.method).uses_lora(p.rank):
        with atomic_dir(ctx.out_dir / ADAPTER) as tmp:
            save_pretrained(model, tmp)
    else:
        save_model_and_tokenizer(model, tok, ctx.out_dir / "model")


def _matrix(ctx: StageContext, p: StepParams, trained: list[str], row: dict[str, float]) -> None:
    prev = ctx.inputs.get(PREV)
    order: list[str] = []
    rows: list[list[float]] = []
    if prev is not None and p.setting is not None:
        before = read_matrix(prev)
        order, rows = before["order"], before["rows"]
    record: MatrixRecord = {
        "columns": list(p.languages),
        "order": [*order, *trained],
        "rows": [*rows, [row[lang] for lang in p.languages]],
        "metric": p.task.metric,
    }
    atomic_write_json(ctx.out_dir / "matrix.json", record)


def _scores(
    ctx: StageContext,
    p: StepParams,
    label: str,
    results: dict[str, Any],
    trainable: int,
    extra: dict[str, Any],
) -> list[Score]:
    """Row k of R as score records with bootstrap intervals; the items go to ``items.jsonl``."""
    sets = {
        lang: ItemSet(
            label,
            lang,
            r.kind,
            r.ids,
            r.columns,
            task=p.task.name,
            seed=p.seed,
            step=p.order_index,
            setting=p.setting,
            n_labels=r.n_labels,
        )
        for lang, r in results.items()
    }
    write_items(ctx.out_dir / ITEMS_FILE, list(sets.values()))
    scores = [
        Score(
            model=label,
            lang=lang,
            metric=p.task.metric,
            value=float(r.value),
            task=p.task.name,
            params=trainable,
            seed=p.seed,
            step=p.order_index,
            setting=p.setting,
            extra=extra,
        )
        for lang, r in results.items()
    ]
    return [score_with_items(sc, sets[sc.lang], p.bootstrap) for sc in scores]


@STAGES.register(
    "sequential_step",
    "train on one language (or all) and score every language: a row of R (Khelli et al. 2025)",
)
class SequentialStep(Stage[StepParams]):
    category = "training"
    version = "2"
    inputs = (DATA, BASE, PREV, ORDER)
    #: model/ (full fine-tuning) or adapter/ (LoRA methods), fisher.safetensors (EWC)
    outputs = (Artifact.MATRIX, Artifact.ITEMS, Artifact.MODEL, "adapter/")

    @classmethod
    def named_inputs(cls, params: StepParams) -> Sequence[str]:
        order = [ORDER] if params.train_languages is None else []  # the step's language
        return [*order, *plugin_inputs(params.train.plugins)]

    @classmethod
    def arm(cls, params: StepParams) -> str | None:
        """The arm the step's scores name: ``VANILLA``, ``SHARED LoRA r=4``, ``untrained``."""
        return "untrained" if params.evaluate_only else arm_label(params.method, params.rank)

    @classmethod
    def merged_model(
        cls, params: StepParams, inputs: dict[str, Path], entry: Path
    ) -> tuple[torch.nn.Module, Any]:
        """A LoRA step's classifier as one model, for ``polymnesia export``: its base (input
        ``base``) with the classification head as the step builds it, the adapter of
        ``entry/adapter`` (and the head trained with it) loaded, then merged into the base
        (PEFT's ``merge_and_unload``); and its tokenizer."""
        n_labels = num_labels(params.task, inputs[DATA], params.languages, params.slot_field)
        model, tok = load_classifier(
            inputs[BASE],
            n_labels,
            params.task.kind,
            seed=params.seed + 1234,
            bidirectional=params.task.context == "bidirectional",
        )
        return merge_adapter(load_adapter(model, entry / ADAPTER)), tok

    def run(self, ctx: StageContext[StepParams]) -> list[Score]:
        p = ctx.params
        trained = (
            p.train_languages
            if p.train_languages is not None
            else [read_order(ctx.input(ORDER))[p.order_index or 0]]
        )
        n_labels = num_labels(p.task, ctx.input(DATA), p.languages, p.slot_field)
        model, tok, base = _build_model(ctx, p, n_labels)
        info: dict[str, Any] = {"trainable": trainable_parameters(model)}
        if not p.evaluate_only:
            model, summary = _train(ctx, p, model, tok, trained, base)
            del base
            info.update(summary)
            _save(ctx, p, model, tok)
        test = _examples(ctx, p, tok, p.languages, "test", p.eval_per_lang)
        # the trained model is saved above, so it may be cast for scoring
        model, rt = place_for_inference(model, stage="sequential_step", precision=p.eval_precision)
        t0 = time.time()
        results = evaluate_items_by_language(
            model,
            test,
            kind=p.task.kind,
            metric=p.task.metric,
            batch_size=p.eval_batch_size,
            tag_names=_tags(ctx, p),
            runtime=rt,
        )
        row = {lang: r.value for lang, r in results.items()}
        info.update(
            eval_seconds=round(time.time() - t0, 3),
            eval_examples=sum(len(v) for v in test.values()),
        )
        _matrix(ctx, p, trained, row)
        atomic_write_json(ctx.out_dir / "step_summary.json", {"trained": trained, **info})
        label = "untrained" if p.evaluate_only else arm_label(p.method, p.rank)
        extra = {
            "method": p.method,
            "rank": p.rank,
            "trained": trained,
            **{k: v for k, v in info.items() if k != "validation_history"},
        }
        return _scores(ctx, p, label, results, int(info["trainable"]), extra)
