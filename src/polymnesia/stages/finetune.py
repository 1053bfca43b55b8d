"""Stage ``finetune_task``: fine-tune a pretrained model on a labelled task, then score it.

One arm of Mao et al. 2022's experiments (their Section 5): the body of
the ``model`` input (a causal LM from the pretraining stage, or an imported
model: a decoder, or an encoder with its masked-LM head) gets a new
classification head and is fine-tuned on the *source* languages, either

* ``method: slf``: single-language fine-tuning (the ordinary loop step; one source), or
* ``method: <combiner>`` (uniform, pcgrad, gradvac, mgda, lf_mlf): a batch per
  source language per step, per-language gradients combined
  (:mod:`polymnesia.training.multilingual_step`).

Then, on the test split: the task metric on each source (fine-tuning
performance, Tables 4-6) and each target (zero-shot, Tables 1-3), and the
pre-training loss of held-out text under the fine-tuned body with the *base*
model's pre-training head: the causal-LM loss ``lm_loss`` (nats per token)
of a decoder, the masked-LM loss ``mlm_loss`` (nats per masked token, fixed
seeded masks, :mod:`polymnesia.evaluation.masked`) of an encoder. F_p =
L_p(theta_f) - L_p(theta_p) is formed in the report against the base
model's loss from ``evaluate_lm`` or ``pretraining_loss`` (our measurement
of the paper's forgetting, Section 3.1: the paper never measures it; the
fine-tuned model has no pre-training head, so the pretrained one is
reattached).

Every task score carries a percentile bootstrap interval over its test
examples (``ci_low``, ``ci_high``, ``n``); predictions and gold labels (and the
per-text likelihoods behind ``lm_loss``) are kept in ``items.jsonl`` for paired
tests between arms.

Departures: a fixed number of steps instead of epochs; no learning-rate grid
search or checkpoint selection on validation data (the paper grid-searches).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from pydantic import Field, model_validator

from polymnesia.config.base import StrictModel, fingerprint_renames, fingerprinted_as, renamed
from polymnesia.data.prepared import read_split, read_texts
from polymnesia.errors import ConfigError, DataError
from polymnesia.evaluation.config import TextEvaluation
from polymnesia.evaluation.inference import place_for_inference
from polymnesia.evaluation.pretraining import (
    LOSS_METRIC,
    LOSS_UNIT,
    pretraining_loss_items,
)
from polymnesia.gradients import get_combiner
from polymnesia.io import atomic_write_json
from polymnesia.items import ITEMS_FILE, BootstrapConfig, ItemSet, score_with_items, write_items
from polymnesia.models.build import load_pretrained
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import (
    STAGES,
    Artifact,
    Provenance,
    Role,
    Stage,
    StageContext,
    named_models,
)
from polymnesia.results import Score
from polymnesia.runtime import current
from polymnesia.stages.common import DATA, MODEL, plugin_inputs, train_in_stage, train_summary
from polymnesia.tasks.classification import load_classifier, resolve_model_folder, tag_names_of
from polymnesia.tasks.config import TaskConfig
from polymnesia.tasks.kinds import (
    TRIVIAL,
    build_examples,
    evaluate_task,
    label_space,
    secondary_metrics,
    task_records,
    training_data,
    trivial_baselines,
)
from polymnesia.training.config import TrainConfig
from polymnesia.training.multilingual_step import MultilingualData, MultilingualStep

HEAD_SEED_BASE = 1234
#: F_p's held-out text when it is not the task's data (lf_mlf's forgetting_data stage)
FORGETTING_DATA = Role("forgetting_data", Artifact.SPLITS, required=False)


class FinetuneEvalConfig(TextEvaluation):
    """How much labelled data each arm trains and is scored on (test examples: a seeded sample
    by verse id), and how F_p is measured; ``precision``, ``batch_size`` and
    ``max_texts_per_lang`` are every evaluation section's (:class:`TextEvaluation`)."""

    max_train_per_lang: int | None = Field(
        2000, gt=0, description="labelled training examples per source (seeded sample by verse id)"
    )
    max_texts_per_target: int | None = Field(
        None,
        gt=0,
        description="cap on test examples per target language; null: max_texts_per_lang",
        json_schema_extra=fingerprinted_as("max_eval_per_target"),
    )
    forgetting_texts: int | None = Field(
        50, gt=0, description="held-out texts per language for F_p"
    )
    forgetting_max_length: int = Field(128, gt=1)
    forgetting_languages: list[str] | None = Field(None, description="default: every data language")

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        moves = {"max_eval_per_lang": "max_texts_per_lang"}
        moves["max_eval_per_target"] = "max_texts_per_target"
        return renamed(data, moves, "evaluate")


#: renamed keys enter stage fingerprints under their old names, so cache entries are kept
fingerprint_renames(FinetuneEvalConfig, max_texts_per_lang="max_eval_per_lang")


class FinetuneParams(StrictModel):
    label: str = Field(description="the arm's name in tables (LF-MLF, Uniform-MLF, SLF, ...)")
    method: str = Field(description="slf, or a gradient combiner (polymnesia ls combiners)")
    method_options: dict[str, Any] = Field(default_factory=dict)
    sources: list[str]
    targets: list[str]
    task: TaskConfig
    train: TrainConfig
    evaluation: FinetuneEvalConfig = Field(default_factory=FinetuneEvalConfig)
    forgetting_languages: list[str] = Field(
        default_factory=list, description="languages whose LM loss is scored (F_p); empty: none"
    )
    seed: int = 0
    setting: str = Field(
        "main", description="which part of the experiment (main, top3, branch name)"
    )
    subset_seed: int = 0
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    base_model: str | None = Field(
        None,
        description="a Hub id or folder to fine-tune instead of the 'model' input (e.g. XLM-R "
        "base)",
    )


def sample_by_id(records: list[dict[str, Any]], n: int | None, seed: int) -> list[dict[str, Any]]:
    """At most ``n`` records chosen by a seeded hash of their id: the same verse ids in every
    language (aligned), spread over the whole split (every genre), whatever order the
    prepared split is in."""
    if n is None or len(records) <= n:
        return records
    key = lambda r: hashlib.sha256(f"{seed}:{r['id']}".encode()).hexdigest()  # noqa: E731
    return sorted(records, key=key)[:n]


def _examples(data_dir, lang, split, task, tok, cap=None, seed=0):
    """Examples of one language and split: sampled verses (the cap counts verses), then the
    constructed task if one is named, then model inputs."""
    recs = task_records(sample_by_id(read_split(data_dir, lang, split), cap, seed), task, seed)
    return build_examples(recs, task, tok, train=split == "train"), recs


@STAGES.register(
    "finetune_task",
    "fine-tune a classifier (SLF or per-language combiner), score sources/targets/forgetting",
)
class FinetuneTask(Stage[FinetuneParams]):
    category = "training"
    version = "3"
    distributed = True
    resumable = True
    tag_names: list[str] | None = None  # token tasks: set by _load
    inputs = (DATA, MODEL.optional(), FORGETTING_DATA)
    outputs = (Artifact.MODEL, Artifact.ITEMS)

    @classmethod
    def named_inputs(cls, params: FinetuneParams) -> Sequence[str]:
        model = [MODEL] if params.base_model is None else []  # the body to fine-tune
        return [*model, *plugin_inputs(params.train.plugins)]

    @classmethod
    def provenance(cls, params: FinetuneParams) -> Provenance:
        """For a model card: the source languages it is fine-tuned on, and
        ``base_model`` where set."""
        return Provenance(tuple(params.sources), named_models(params.base_model))

    def run(self, ctx: StageContext[FinetuneParams]) -> list[Score]:
        p = ctx.params
        if p.method == "slf" and len(p.sources) != 1:
            raise ConfigError(f"method 'slf' fine-tunes one source language, got {p.sources}")
        model, tok, n_labels = self._load(ctx)
        model, result, stop = self._train(ctx, model, tok)
        scores, items = self._task_scores(ctx, model, tok, n_labels)
        lm_scores, lm_sets = self._lm_scores(ctx, model, tok)
        scores += lm_scores
        if ctx.is_main_process:
            write_items(ctx.out_dir / ITEMS_FILE, items + lm_sets)
            save_model_and_tokenizer(model, tok, ctx.out_dir / "model")
            atomic_write_json(ctx.out_dir / "train_summary.json", {**result, **stop})
        for s in scores:
            s.extra.update({"stopped_at": stop.get("stop_step")})
        return scores

    def _load(self, ctx: StageContext[FinetuneParams]):

        p = ctx.params
        recs = [r for lang in p.sources for r in read_split(ctx.input(DATA), lang, "train")]
        n, names = label_space(p.task, recs)
        where = p.base_model or ctx.input(MODEL)
        model, tok = load_classifier(
            where,
            n,
            p.task.kind,
            seed=HEAD_SEED_BASE + p.seed,
            bidirectional=p.task.context == "bidirectional",
        )
        if names:
            conf: Any = model.config
            conf.id2label = dict(enumerate(names))
            conf.label2id = {v: k for k, v in enumerate(names)}
        self.tag_names = names
        return model, tok, n

    def _train(self, ctx: StageContext[FinetuneParams], model, tok):

        p = ctx.params
        sets = []
        for lang in p.sources:
            ex, _ = _examples(
                ctx.input(DATA),
                lang,
                "train",
                p.task,
                tok,
                p.evaluation.max_train_per_lang,
                p.subset_seed,
            )
            if not ex:
                raise DataError(
                    f"source language '{lang}' has no labelled training data for task "
                    f"'{p.task.name}'"
                )
            sets.append(training_data(ex, p.task, tok.pad_token_id))
        if p.method == "slf":
            done = train_in_stage(ctx, model, sets[0], p.train, seed=p.seed)
            return done.model, train_summary(done.result), {}
        step = MultilingualStep(get_combiner(p.method, **p.method_options), p.sources)
        data = MultilingualData(sets, p.sources, seed=p.seed)
        done = train_in_stage(ctx, model, data, p.train, seed=p.seed, before=[step], step_fn=step)
        stop = {"last_weights": step.last_weights, **step.stop_info}
        return done.model, train_summary(done.result), stop

    def _task_scores(
        self, ctx: StageContext[FinetuneParams], model, tok, n_labels: int
    ) -> tuple[list[Score], list[ItemSet]]:

        p = ctx.params
        roles = {**{t: "target" for t in p.targets}, **{s: "source" for s in p.sources}}
        ex = {
            lang: _examples(
                ctx.input(DATA),
                lang,
                "test",
                p.task,
                tok,
                p.evaluation.max_texts_per_lang
                if roles[lang] == "source"
                else p.evaluation.max_texts_per_target or p.evaluation.max_texts_per_lang,
                p.subset_seed,
            )[0]
            for lang in roles
        }
        # every process scores its shard of the test examples (the stage is distributed); the
        # trained model stays float32 in memory (it is saved next), so bf16/fp16 is autocast
        rt = current(p.evaluation.precision, sharded=True)
        got = evaluate_task(
            model,
            ex,
            p.task,
            batch_size=p.evaluation.batch_size,
            tag_names=self.tag_names,
            runtime=rt,
        )
        names = tag_names_of(model, self.tag_names)
        judged = [p.task.metric, *secondary_metrics(p.task)]
        trivial = {m: trivial_baselines(ex, p.task, names, metric=m) for m in judged}
        out, sets = [], []
        for lang, (r, values) in got.items():
            items = ItemSet(
                p.label,
                lang,
                r.kind,
                r.ids,
                r.columns,
                task=p.task.name,
                group=roles[lang],
                seed=p.seed,
                setting=p.setting,
                n_labels=r.n_labels or None,
            )
            sets.append(items)
            for metric, value in values.items():
                score = Score(
                    model=p.label,
                    lang=lang,
                    metric=metric,
                    value=value,
                    task=p.task.name,
                    group=roles[lang],
                    seed=p.seed,
                    setting=p.setting,
                    extra={"n": len(ex[lang]), "method": p.method, "sources": p.sources},
                )
                if metric in judged:
                    score = score_with_items(score, items, p.bootstrap)
                    if lang in trivial[metric]:  # what a predictor that learned nothing scores
                        score.extra["trivial_baseline"] = {
                            "answer": TRIVIAL[p.task.kind],
                            "value": trivial[metric][lang],
                        }
                out.append(score)
        return out, sets

    def _lm_scores(
        self, ctx: StageContext[FinetuneParams], model, tok
    ) -> tuple[list[Score], list[ItemSet]]:
        """The pre-training loss of held-out text under the fine-tuned body with the base
        model's pre-training head (:mod:`polymnesia.evaluation.pretraining`): ``lm_loss``
        for a decoder, ``mlm_loss`` for an encoder; group ``forgetting``, task the fine-tuned
        task's name (entries of versions before that say ``lm``)."""
        p = ctx.params
        if not p.forgetting_languages:
            return [], []
        lm: Any = load_pretrained(resolve_model_folder(p.base_model or ctx.input(MODEL)))
        body = getattr(model, model.base_model_prefix)
        getattr(lm, str(lm.base_model_prefix)).load_state_dict(body.state_dict())
        lm, rt = place_for_inference(
            lm, stage="finetune_task", precision=p.evaluation.precision, sharded=True
        )
        out, sets = [], []
        source = ctx.inputs.get(FORGETTING_DATA) or ctx.input(DATA)  # F_p's own text, if any
        for lang in p.forgetting_languages:
            texts = read_texts(source, lang, "test", p.evaluation.forgetting_texts)
            objective, st, cols = pretraining_loss_items(
                lm,
                tok,
                texts,
                batch_size=p.evaluation.batch_size,
                max_length=p.evaluation.forgetting_max_length,
                runtime=rt,
            )
            items = ItemSet(  # task: the fine-tuned task, so F_p of each task's model is its own
                p.label,
                lang,
                "lm",
                list(range(len(texts))),
                cols,
                task=p.task.name,
                group="forgetting",
                seed=p.seed,
                setting=p.setting,
            )
            score = Score(
                model=p.label,
                lang=lang,
                metric=LOSS_METRIC[objective],
                value=st.loss,
                task=p.task.name,
                group="forgetting",
                seed=p.seed,
                setting=p.setting,
                extra={"tokens": st.tokens, "method": p.method, "unit": LOSS_UNIT[objective]},
            )
            if items.n:
                sets.append(items)
                score = score_with_items(score, items, p.bootstrap)
            out.append(score)
        return out, sets
