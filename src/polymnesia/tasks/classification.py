"""Sequence classification on top of a causal LM (or any Hub encoder/decoder).

Inputs follow :mod:`polymnesia.evaluation.likelihood`: each text is encoded
without special tokens and BOS is prepended (when the tokenizer has one);
examples longer than ``max_length`` tokens are *truncated at the end* (the
label of a verse does not depend on its tail). Decoder classifiers
(``MistralForSequenceClassification``) pool the last non-padding token, so
batches are padded on the right with ``config.pad_token_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.metrics.classification import accuracy, bio_spans, macro_f1, span_f1
from polymnesia.models.anatomy import split_body_head
from polymnesia.models.build import Embeds
from polymnesia.runtime import Runtime, say_once
from polymnesia.tasks.load_report import head_report, quiet_load_report
from polymnesia.tokenizers.bpe import load_tokenizer
from polymnesia.tokenizers.encode import token_ids

Kind = Literal["sequence", "token", "span"]
HEAD_SEED = 1234  # default seed of the new classification head (see load_classifier)


def _bos(tokenizer: Any) -> list[int]:
    return [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []


def build_sequence_examples(
    records: list[dict[str, Any]], tokenizer: Any, max_length: int
) -> list[dict[str, Any]]:
    """Prepared records -> ``{"input_ids", "labels": int, "lang", "id"}`` (BOS + text, truncated).

    Records without a label (``label`` is None) are skipped: they cannot be
    trained or scored. ``max_length`` counts BOS. A record with a second text
    in ``meta["pair"]`` (XNLI's hypothesis) reads ``BOS text EOS pair``; the
    pair keeps at most half of ``max_length`` and the first text is cut to the rest.
    """
    if max_length < 2:
        raise PolymnesiaError(f"max_length must be at least 2 (BOS + one token), got {max_length}")
    kept = [r for r in records if r.get("label") is not None]
    if not kept:
        return []
    enc = token_ids(tokenizer, [r["text"] for r in kept])
    pairs = [(r.get("meta") or {}).get("pair") for r in kept]
    pair_ids = (
        token_ids(tokenizer, [str(p or "") for p in pairs])
        if any(p is not None for p in pairs)
        else [[] for _ in kept]
    )
    bos = _bos(tokenizer)
    sep = getattr(tokenizer, "eos_token_id", None)
    out = []
    for r, ids, pair, pids in zip(kept, enc, pairs, pair_ids, strict=True):
        if pair is None or sep is None:
            seq = (bos + list(ids))[:max_length]
        else:
            tail = [sep, *list(pids)][: max(1, max_length // 2)]
            seq = (bos + list(ids))[: max_length - len(tail)] + tail
        out.append({"input_ids": seq, "labels": int(r["label"]), "lang": r["lang"], "id": r["id"]})
    return out


class ClassificationData:
    """Examples for the training loop (``TrainData``): right-padded batches.

    ``labels`` is ``[B]`` for sequence examples (an int label) and ``[B, L]``
    (``-100`` on padding) for token examples (a list of labels).
    """

    def __init__(self, examples: list[dict[str, Any]], pad_id: int) -> None:
        if not examples:
            raise DataError("no labelled examples to train on")
        self.examples, self.pad_id = list(examples), int(pad_id)

    def __len__(self) -> int:
        return len(self.examples)

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        return collate_examples([self.examples[i] for i in indices], self.pad_id)


def collate_examples(rows: Sequence[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad ``rows`` into ``input_ids``, ``attention_mask`` and ``labels`` tensors."""
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    token = isinstance(rows[0]["labels"], list)
    labels = torch.full((len(rows), width), -100, dtype=torch.long) if token else None
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"], dtype=torch.long)
        mask[i, :n] = 1
        if labels is not None:
            labels[i, :n] = torch.tensor(r["labels"], dtype=torch.long)
    if labels is None:
        labels = torch.tensor([int(r["labels"]) for r in rows], dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def resolve_model_folder(model_folder: str | Path) -> str:
    """A model stage's entry (holding ``model/``), the ``model/`` folder itself, or a Hub id."""
    path = Path(model_folder)
    if (path / "model" / "config.json").exists():
        return str(path / "model")
    if path.exists():
        if not (path / "config.json").exists():
            raise PolymnesiaError(f"{path} holds no model (no config.json there or in model/)")
        return str(path)
    if str(model_folder).startswith((".", "/")):
        raise PolymnesiaError(f"model folder not found: {model_folder}")
    return str(model_folder)


def load_classifier(
    model_folder: str | Path,
    num_labels: int,
    kind: Kind = "sequence",
    *,
    seed: int = HEAD_SEED,
    bidirectional: bool = False,
) -> tuple[torch.nn.Module, Any]:
    """A classifier (``AutoModelFor{Sequence,Token}Classification``, or for ``kind="span"``
    ``AutoModelForQuestionAnswering``: a start and an end logit per token) and its tokenizer.

    The body comes from ``model_folder`` (a causal-LM folder written by a model
    stage, or a Hub id); its LM head is dropped. The new head (every parameter
    outside the body, ``model.base_model``) is re-initialised from
    ``torch.Generator().manual_seed(seed)``: weights ~ N(0, initializer_range),
    biases 0, so the same seed gives the same head whatever the global RNG.
    ``config.pad_token_id`` is set from the tokenizer (EOS when it has no pad).
    ``num_labels`` is ignored for span models. ``bidirectional``: every token attends to
    the whole text (:func:`make_bidirectional`; a task's ``context: bidirectional``).
    """
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
    )

    autos = {
        "sequence": AutoModelForSequenceClassification,
        "token": AutoModelForTokenClassification,
        "span": AutoModelForQuestionAnswering,
    }
    if kind not in autos:
        raise PolymnesiaError(
            f"classifier kind must be 'sequence', 'token' or 'span', got '{kind}'"
        )
    if kind != "span" and num_labels < 2:
        raise PolymnesiaError(f"a classifier needs at least 2 labels, got {num_labels}")
    where = resolve_model_folder(model_folder)
    tokenizer = load_tokenizer(where)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    extra = {} if kind == "span" else {"num_labels": num_labels}
    try:
        with quiet_load_report():
            model, info = autos[kind].from_pretrained(where, output_loading_info=True, **extra)
    except (OSError, ValueError) as e:
        raise PolymnesiaError(
            f"cannot load a {kind} model from {where}: {str(e).splitlines()[0]}"
        ) from None
    model.config.pad_token_id = tokenizer.pad_token_id
    init_head(model, seed)
    for line in head_report(model, {n for n, _ in head_parameters(model)}, info, where, seed):
        say_once(line)
    if bidirectional:
        make_bidirectional(model)
    return model, tokenizer


def make_bidirectional(model: torch.nn.Module) -> torch.nn.Module:
    """Remove a decoder's causal mask: every token attends to every other (padding keys
    stay masked). transformers builds a bidirectional mask when ``config.is_causal`` is
    false, and its attention modules read their own ``is_causal`` where no mask is built;
    both are set, and the config flag is saved with the model. A one-line error for a
    model whose attention does not follow the flag (checked on two inputs that differ in
    their last token only: the first position's output must change)."""
    config: Any = model.config
    config.is_causal = False
    for module in model.modules():
        if hasattr(module, "is_causal") and isinstance(module.is_causal, bool):
            module.is_causal = False
    if not _first_position_sees_the_last(model):
        raise PolymnesiaError(
            f"{type(model).__name__} keeps its causal mask when config.is_causal is false; "
            "use task.context left or echo with this model"
        )
    return model


@torch.no_grad()
def _first_position_sees_the_last(model: torch.nn.Module) -> bool:
    device = next(model.parameters()).device
    if not isinstance(model, Embeds):
        raise PolymnesiaError(f"{type(model).__name__} has no input embeddings to probe")
    vocab = int(model.get_input_embeddings().weight.shape[0])
    a = torch.tensor([[1, 2, 3, 4]], device=device) % vocab
    b = a.clone()
    b[0, -1] = (b[0, -1] + 1) % vocab
    was_training = model.training
    model.eval()
    try:
        out_a, out_b = model(input_ids=a), model(input_ids=b)
    finally:
        model.train(was_training)
    first = "start_logits" if hasattr(out_a, "start_logits") else "logits"
    return not torch.equal(getattr(out_a, first)[0, 0], getattr(out_b, first)[0, 0])


def head_parameters(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    """Parameters outside the shared body (``base_model``): the task head, any architecture."""

    return split_body_head(model, "classification head", trainable_only=False)[1]


@torch.no_grad()
def init_head(model: torch.nn.Module, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    std = float(getattr(model.config, "initializer_range", 0.02))
    for _, p in head_parameters(model):
        if p.ndim >= 2:
            p.copy_(torch.randn(p.shape, generator=gen) * std)
        else:
            p.zero_()


def predict(
    model: torch.nn.Module,
    examples: list[dict[str, Any]],
    batch_size: int = 64,
    runtime: Runtime | None = None,
) -> list[int] | list[list[int]]:
    """Predicted labels in input order: an int per sequence example, or for token
    examples a list with one label per scored position (``labels != -100``).

    ``runtime`` (default: one process on the model's device, float32): each process
    predicts its shard of the examples, under autocast to the runtime's precision,
    and the predictions are gathered back in input order, so 1 and N processes
    give the same labels.
    """
    if not examples:
        return []
    rt = runtime or Runtime(device=next(model.parameters()).device)
    mine = rt.shard(examples)
    with rt.autocast():
        local = _predict_local(model, mine, batch_size) if mine else []
    return rt.gather(local, len(examples))


@torch.inference_mode()
def _predict_local(
    model: torch.nn.Module, examples: list[dict[str, Any]], batch_size: int
) -> list[Any]:
    pad_raw: Any = getattr(model.config, "pad_token_id", None)
    pad = 0 if pad_raw is None else int(pad_raw)
    device = next(model.parameters()).device
    token = isinstance(examples[0]["labels"], list)
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]["input_ids"]))
    out: list[Any] = [None] * len(examples)
    was_training = model.training
    model.eval()
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = collate_examples([examples[i] for i in idx], pad)
        logits = model(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
        ).logits
        pred = logits.argmax(dim=-1).cpu()
        for row, i in enumerate(idx):
            if token:
                keep = batch["labels"][row] != -100
                out[i] = pred[row][keep].tolist()
            else:
                out[i] = int(pred[row])
    model.train(was_training)
    return out


@dataclass(frozen=True)
class LanguageResult:
    """One language's score and the per-example columns behind it
    (:class:`polymnesia.items.ItemSet`).

    ``kind`` is ``label`` (columns ``pred``, ``gold``) for sequence examples and
    ``token`` (``correct``, ``total``, ``tp``, ``n_pred``, ``n_gold``) for token examples.
    """

    value: float
    kind: str
    ids: list[Any]
    columns: dict[str, list[float]]
    n_labels: int


def evaluate_by_language(
    model: torch.nn.Module,
    examples_by_lang: dict[str, list[dict[str, Any]]],
    *,
    kind: Kind = "sequence",
    metric: str = "accuracy",
    batch_size: int = 64,
    tag_names: Sequence[str] | None = None,
    runtime: Runtime | None = None,
) -> dict[str, float]:
    """``metric`` per language, predicting every language's examples in one batched pass.

    ``accuracy`` and ``macro_f1`` (sequence; macro-F1 over ``0..num_labels-1``),
    token ``accuracy`` over scored positions, ``span_f1`` over BIO tags
    (``tag_names`` maps label ids to tag strings; default ``config.id2label``).
    Languages with no examples are left out.
    """
    results = evaluate_items_by_language(
        model,
        examples_by_lang,
        kind=kind,
        metric=metric,
        batch_size=batch_size,
        tag_names=tag_names,
        runtime=runtime,
    )
    return {lang: r.value for lang, r in results.items()}


def evaluate_items_by_language(
    model: torch.nn.Module,
    examples_by_lang: dict[str, list[dict[str, Any]]],
    *,
    kind: Kind = "sequence",
    metric: str = "accuracy",
    batch_size: int = 64,
    tag_names: Sequence[str] | None = None,
    runtime: Runtime | None = None,
) -> dict[str, LanguageResult]:
    """:func:`evaluate_by_language` with the per-example columns each score comes from
    (predictions sharded over ``runtime``'s processes, see :func:`predict`)."""

    accepted = {"sequence": ("accuracy", "macro_f1"), "token": ("accuracy", "span_f1")}
    if metric not in accepted.get(kind, ()):
        raise PolymnesiaError(
            f"metric '{metric}' does not fit kind '{kind}'; accepted: "
            f"{', '.join(accepted.get(kind, ()))}"
        )
    langs = [lang for lang, ex in examples_by_lang.items() if ex]
    flat = [e for lang in langs for e in examples_by_lang[lang]]
    preds = predict(model, flat, batch_size, runtime)
    config: Any = model.config
    n_labels = int(config.num_labels)
    names = tag_names_of(model, tag_names) if kind == "token" else []
    out, start = {}, 0
    for lang in langs:
        n = len(examples_by_lang[lang])
        p, gold_ex = preds[start : start + n], flat[start : start + n]
        start += n
        value = _score(p, gold_ex, kind, metric, model, tag_names, accuracy, macro_f1, span_f1)
        cols = (
            _label_columns(p, gold_ex) if kind == "sequence" else _token_columns(p, gold_ex, names)
        )
        ids = [e.get("id", i) for i, e in enumerate(gold_ex)]
        out[lang] = LanguageResult(
            value, "label" if kind == "sequence" else "token", ids, cols, n_labels
        )
    return out


def tag_names_of(model: torch.nn.Module, tag_names: Sequence[str] | None = None) -> list[str]:
    """``tag_names`` when given, else the model's ``config.id2label`` in label-id order."""
    if tag_names is not None:
        return list(tag_names)
    cfg: Any = model.config
    return [cfg.id2label[i] for i in range(int(cfg.num_labels))]


def _label_columns(
    preds: Sequence[Any], gold_ex: Sequence[dict[str, Any]]
) -> dict[str, list[float]]:
    return {
        "pred": [float(x) for x in preds],
        "gold": [float(int(e["labels"])) for e in gold_ex],
    }


def _token_columns(
    preds: Sequence[Any], gold_ex: Sequence[dict[str, Any]], names: Sequence[str]
) -> dict[str, list[float]]:
    """Per sentence: correct and scored tokens (token accuracy), span matches and counts (span
    F1).
    """

    cols: dict[str, list[float]] = {k: [] for k in ("correct", "total", "tp", "n_pred", "n_gold")}
    bio = all(n == "O" or n[:2] in ("B-", "I-") for n in names)
    for p, e in zip(preds, gold_ex, strict=True):
        g = _gold_token_labels(e)
        cols["correct"].append(float(sum(int(a == b) for a, b in zip(p, g, strict=True))))
        cols["total"].append(float(len(g)))
        ps = bio_spans([names[x] for x in p]) if bio else set()
        gs = bio_spans([names[x] for x in g]) if bio else set()
        cols["tp"].append(float(len(ps & gs)))
        cols["n_pred"].append(float(len(ps)))
        cols["n_gold"].append(float(len(gs)))
    return cols


def _gold_token_labels(ex: dict[str, Any]) -> list[int]:
    return [int(x) for x in ex["labels"] if int(x) != -100]


def _score(preds, gold_ex, kind, metric, model, tag_names, accuracy, macro_f1, span_f1) -> float:
    if kind == "sequence":
        gold = [int(e["labels"]) for e in gold_ex]
        if metric == "macro_f1":
            return float(macro_f1(preds, gold, n_labels=int(model.config.num_labels)))
        return float(accuracy(preds, gold))
    golds = [_gold_token_labels(e) for e in gold_ex]
    names = tag_names_of(model, tag_names) if metric == "span_f1" else None
    return token_metric(preds, golds, metric, names)


def token_metric(
    preds: Sequence[Sequence[int]],
    golds: Sequence[Sequence[int]],
    metric: str,
    tag_names: Sequence[str] | None = None,
) -> float:
    """Token accuracy over scored words, or span F1 over BIO tags (``tag_names``: id -> tag)."""
    if metric == "accuracy":
        return float(accuracy([x for p in preds for x in p], [x for g in golds for x in g]))
    if tag_names is None:
        raise PolymnesiaError("span_f1 needs the tag names (label id -> BIO tag)")
    names = list(tag_names)
    return float(
        span_f1([[names[x] for x in p] for p in preds], [[names[x] for x in g] for g in golds])
    )
