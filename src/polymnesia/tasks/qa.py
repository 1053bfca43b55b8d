"""Extractive question answering (span prediction) on top of a decoder body.

Mao et al. 2022 fine-tunes on TyDiQA-GoldP (Table 2, 5): given a question and a
passage, predict the answer's start and end in the passage. Here the body of
a causal LM gets a two-logit head (``AutoModelForQuestionAnswering``:
``qa_outputs``, one start and one end logit per token) and reads
``BOS question SEP passage`` (SEP: the tokenizer's EOS), so that every
passage token has seen the whole question; a causal decoder sees only the
passage *before* a token, so the start and the end are decided from the left
context alone (an encoder such as XLM-R sees both sides: a departure that the
"on top of the decoder body" design brings).

Records: ``text`` is the passage, ``meta["question"]`` the question,
``meta["answers"]`` SQuAD's ``{"text": [...], "answer_start": [...]}`` (char
offsets into ``text``). Token positions of an answer come from the fast
tokenizer's offsets: the first token ending after the answer's first char,
the last token starting before its end. Passages are cut at ``max_length``
tokens (one window, no document stride): a training example whose first
answer falls outside the window is dropped, a test example is kept and can
only be answered from the window (so it counts against the model).

Decoding (:func:`best_spans`) takes the highest ``start + end`` logit over
passage tokens with ``start <= end < start + max_answer_tokens``, as the
SQuAD baselines do; the answer text is the passage between the two tokens'
offsets, scored with :mod:`polymnesia.metrics.qa`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.metrics.qa import question_scores
from polymnesia.runtime import Runtime
from polymnesia.tasks.tagging import separator


def _answers(record: dict[str, Any]) -> tuple[list[str], list[int]]:
    ans = (record.get("meta") or {}).get("answers") or {}
    texts = [str(t) for t in ans.get("text", [])]
    starts = [int(s) for s in ans.get("answer_start", [])]
    if len(texts) != len(starts):
        raise DataError(
            f"record {record.get('id')} ({record.get('lang')}): answers have "
            f"{len(texts)} texts but {len(starts)} starts"
        )
    return texts, starts


def char_span_to_tokens(
    offsets: Sequence[tuple[int, int]], start: int, end: int
) -> tuple[int, int] | None:
    """Token indices ``(first, last)`` covering chars ``[start, end)``, or None if none does."""
    first = next((i for i, (_, e) in enumerate(offsets) if e > start), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def build_span_examples(
    records: list[dict[str, Any]],
    tokenizer: Any,
    max_length: int,
    *,
    train: bool = False,
    echo: bool = False,
) -> list[dict[str, Any]]:
    """QA records -> ``{"input_ids", "start_positions", "end_positions", "ctx_start",
    "offsets", "context", "answers", "lang", "id"}``.

    ``start/end_positions`` index ``input_ids`` (the first gold answer);
    records without answers are skipped; with ``train=True`` so are records
    whose answer the window cuts off (at test time they are kept, positions -1).
    ``echo``: the passage twice, positions and ``ctx_start`` in the second copy.
    """
    if max_length < (6 if echo else 4):
        raise PolymnesiaError(
            f"max_length must be at least {6 if echo else 4} for QA inputs"
            f"{' with echo' if echo else ''}, got {max_length}"
        )
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    sep = separator(tokenizer)
    out = []
    for r in records:
        texts, starts = _answers(r)
        question = str((r.get("meta") or {}).get("question") or "")
        if not texts or not question:
            continue
        q_ids = tokenizer(question, add_special_tokens=False)["input_ids"]
        enc = tokenizer(r["text"], add_special_tokens=False, return_offsets_mapping=True)
        head = (bos + list(q_ids))[: max_length // 2] + [sep]
        room = (max_length - len(head) - 1) // 2 if echo else max_length - len(head)
        ctx_ids, offsets = (
            list(enc["input_ids"])[:room],
            [tuple(o) for o in enc["offset_mapping"]][:room],
        )
        span = char_span_to_tokens(offsets, starts[0], starts[0] + len(texts[0]))
        if span is None and train:
            continue
        if echo:
            head = head + ctx_ids + [sep]
        s, e = (len(head) + span[0], len(head) + span[1]) if span else (-1, -1)
        out.append(
            {
                "input_ids": head + ctx_ids,
                "start_positions": s,
                "end_positions": e,
                "ctx_start": len(head),
                "offsets": offsets,
                "context": r["text"],
                "answers": texts,
                "lang": r["lang"],
                "id": r["id"],
            }
        )
    return out


def collate_spans(rows: Sequence[dict[str, Any]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad QA rows into ``input_ids``, ``attention_mask``, ``start/end_positions``."""
    width = max(len(r["input_ids"]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        n = len(r["input_ids"])
        ids[i, :n] = torch.tensor(r["input_ids"], dtype=torch.long)
        mask[i, :n] = 1
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "start_positions": torch.tensor([r["start_positions"] for r in rows], dtype=torch.long),
        "end_positions": torch.tensor([r["end_positions"] for r in rows], dtype=torch.long),
    }


class SpanData:
    """QA examples for the training loop (``TrainData``): right-padded batches."""

    def __init__(self, examples: list[dict[str, Any]], pad_id: int) -> None:
        if not examples:
            raise DataError("no answerable QA examples to train on")
        self.examples, self.pad_id = list(examples), int(pad_id)

    def __len__(self) -> int:
        return len(self.examples)

    def collate(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        return collate_spans([self.examples[i] for i in indices], self.pad_id)


def best_spans(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    allowed: torch.Tensor,
    max_answer_tokens: int,
) -> list[tuple[int, int]]:
    """Per row, ``argmax start[i] + end[j]`` over allowed tokens with ``i <= j < i +
    max_answer_tokens``.

    ``allowed`` is a ``[B, L]`` boolean mask (passage tokens); a row with no
    allowed token gives ``(-1, -1)``.
    """
    if start_logits.shape != end_logits.shape or start_logits.shape != allowed.shape:
        raise PolymnesiaError("start logits, end logits and the mask must have one shape [B, L]")
    length = start_logits.shape[1]
    idx = torch.arange(length)
    band = (idx[None, :] >= idx[:, None]) & (idx[None, :] < idx[:, None] + max_answer_tokens)
    out = []
    for s, e, ok in zip(start_logits.float(), end_logits.float(), allowed.bool(), strict=True):
        if not ok.any():
            out.append((-1, -1))
            continue
        valid = band & ok[:, None] & ok[None, :]
        scores = (s[:, None] + e[None, :]).masked_fill(~valid, float("-inf"))
        flat = int(torch.argmax(scores))
        out.append((flat // length, flat % length))
    return out


def span_text(example: dict[str, Any], start: int, end: int) -> str:
    """The passage text between input positions ``start`` and ``end`` (inclusive); "" for none."""
    if start < 0:
        return ""
    offsets = example["offsets"]
    a, b = start - example["ctx_start"], end - example["ctx_start"]
    return str(example["context"][offsets[a][0] : offsets[b][1]]).strip()


@torch.no_grad()
def predict_answers(
    model: torch.nn.Module,
    examples: list[dict[str, Any]],
    batch_size: int = 64,
    max_answer_tokens: int = 64,
    runtime: Runtime | None = None,
) -> list[str]:
    """The predicted answer text of every example, in input order (sharded over
    ``runtime``'s processes and gathered, as :func:`polymnesia.tasks.classification.predict`)."""
    if not examples:
        return []
    rt = runtime or Runtime(device=next(model.parameters()).device)
    mine = rt.shard(examples)
    with rt.autocast():
        local = _answers_local(model, mine, batch_size, max_answer_tokens) if mine else []
    return rt.gather(local, len(examples))


@torch.inference_mode()
def _answers_local(
    model: torch.nn.Module,
    examples: list[dict[str, Any]],
    batch_size: int,
    max_answer_tokens: int,
) -> list[str]:
    pad_raw: Any = getattr(model.config, "pad_token_id", None)
    pad = 0 if pad_raw is None else int(pad_raw)
    device = next(model.parameters()).device
    order = sorted(range(len(examples)), key=lambda i: len(examples[i]["input_ids"]))
    out = [""] * len(examples)
    was_training = model.training
    model.eval()
    for begin in range(0, len(order), batch_size):
        idx = order[begin : begin + batch_size]
        rows = [examples[i] for i in idx]
        batch = collate_spans(rows, pad)
        got = model(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
        )
        allowed = torch.zeros_like(batch["attention_mask"], dtype=torch.bool)
        for row, r in enumerate(rows):
            allowed[row, r["ctx_start"] : len(r["input_ids"])] = True
        spans = best_spans(
            got.start_logits.float().cpu(), got.end_logits.float().cpu(), allowed, max_answer_tokens
        )
        for (s, e), i in zip(spans, idx, strict=True):
            out[i] = span_text(examples[i], s, e)
    model.train(was_training)
    return out


def score_answers(
    predictions: Sequence[str], examples: Sequence[dict[str, Any]]
) -> dict[str, list[float]]:
    """Per-question columns ``exact_match`` and ``squad_f1`` (the max over gold answers)."""
    em, f1 = [], []
    for p, ex in zip(predictions, examples, strict=True):
        a, b = question_scores(p, ex["answers"])
        em.append(a)
        f1.append(b)
    return {"exact_match": em, "squad_f1": f1}
