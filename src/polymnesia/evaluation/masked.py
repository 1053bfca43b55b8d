"""Masked-LM loss of held-out text: the pre-training loss of an encoder (XLM-R, BERT).

Mao et al. 2022 (Section 3.1) defines forgetting as
``F_p = L_p(theta_f) - L_p(theta_p)``, the loss "on the multi-lingual
pre-training task (e.g., masking tokens)" of the fine-tuned model minus that
of the pre-trained one; its models, mBERT and XLM-R, are masked LMs. This
module measures that loss on held-out texts, as
:func:`polymnesia.evaluation.likelihood.lm_items` measures the causal one.

Each text is encoded with the tokenizer's special tokens (``<s> ... </s>``),
truncated at ``max_length``. Of its text-token positions (not the added
special tokens) ``round(rate * n)``, at least one, are chosen by
:func:`mask_positions` from a hash of ``(seed, text, position)`` alone, so
the choice does not depend on the batch a text lands in, on the process
that scores it, or on the model. Every chosen position is replaced by the
mask token, and the loss is the cross-entropy of the original tokens at the
chosen positions only.

Departure from BERT's pre-training recipe (Devlin et al. 2019, Section 3.1,
also XLM-R's): no 80/10/10 split (mask / random token / unchanged) and no
Bernoulli draw per position. The 10% random replacements and the 10% left
unchanged exist to keep the pre-trained representations from relying on the
mask token at fine-tuning time; in a measurement they only add noise. Here
every model (theta_p and each theta_f) sees exactly the same corrupted
inputs and is scored on the same positions, so the difference of losses is
paired and deterministic, and repeated runs give the same number.

Per-text columns (``nll`` summed over the masked positions, ``tokens`` =
masked positions, ``bytes``, ``words``) and the sums come back as for the
causal loss (:class:`~polymnesia.evaluation.likelihood.LMStats`), so items,
bootstrap intervals and paired tests work unchanged; ``LMStats.loss`` is then
nats per masked token (its ``perplexity`` the pseudo-perplexity of the
masked tokens; its bits per byte has no meaning, as only a share of the
text is scored).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.likelihood import (
    LMStats,
    collect,
    default_runtime,
    head_nll,
    length_batches,
    right_pad,
)
from polymnesia.runtime import Runtime
from polymnesia.tokenizers.encode import token_ids

MASK_RATE = 0.15  # BERT's and XLM-R's share of masked tokens
MASK_SEED = 0  # one fixed set of masks: the reference and every arm are scored on the same


def mask_count(n: int, rate: float = MASK_RATE) -> int:
    """How many of ``n`` text tokens are masked: ``round(rate * n)``, at least 1 (0 for none)."""
    return 0 if n <= 0 else max(1, math.floor(rate * n + 0.5))


def mask_positions(
    text: str, n: int, *, rate: float = MASK_RATE, seed: int = MASK_SEED
) -> list[int]:
    """The indices in ``range(n)`` (a text's token positions) to mask, sorted.

    Each index gets the key ``blake2b(seed, text, index)``; the :func:`mask_count`
    smallest keys win. A pure function of ``(seed, text, n)``: the same text is
    masked the same way in every batch, process and model.
    """

    def key(j: int) -> bytes:
        return hashlib.blake2b(f"{seed}\x00{text}\x00{j}".encode(), digest_size=8).digest()

    return sorted(sorted(range(n), key=key)[: mask_count(n, rate)])


def encode_for_masking(
    tokenizer: Any, texts: Sequence[str], max_length: int
) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """Token ids with the tokenizer's special tokens (truncated at ``max_length``), the
    positions of text tokens in them (the candidates for masking), and the UTF-8 bytes each
    sequence covers (the decoded kept tokens when truncated)."""
    enc = tokenizer(
        list(texts), truncation=True, max_length=max_length, return_special_tokens_mask=True
    )
    whole = token_ids(tokenizer, texts)
    seqs, cands, nbytes = [], [], []
    for text, ids, special, all_ids in zip(
        texts, enc["input_ids"], enc["special_tokens_mask"], whole, strict=True
    ):
        cand = [i for i, s in enumerate(special) if not s]
        seqs.append(list(ids))
        cands.append(cand)
        if len(cand) < len(all_ids):
            nbytes.append(len(tokenizer.decode([ids[i] for i in cand]).encode("utf-8")))
        else:
            nbytes.append(len(text.encode("utf-8")))
    return seqs, cands, nbytes


def _mlm_parts(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """The body and the masked-LM head of a RoBERTa/XLM-R (``lm_head``) or BERT (``cls``)
    model, both applicable to hidden states of any shape; None for other layouts."""
    body = getattr(model, "base_model", None)
    if not isinstance(body, torch.nn.Module) or body is model:
        return None
    for name in ("lm_head", "cls"):
        head = getattr(model, name, None)
        if isinstance(head, torch.nn.Module):
            return body, head
    return None


def _masked_token_nll(
    model: torch.nn.Module,
    ids: torch.Tensor,
    attn: torch.Tensor,
    where: tuple[torch.Tensor, torch.Tensor],
    labels: torch.Tensor,
) -> torch.Tensor:
    """NLL of the original token at every masked position ``where`` (row and column indices
    on the model's device, row-major, computed on the host), ``(N,)``.

    The head runs only on the masked positions where the model's layout is known
    (:func:`_mlm_parts`), in chunks (:func:`~polymnesia.evaluation.likelihood.head_nll`), so
    no ``(B, L, V)`` logits are made; otherwise full logits.
    """
    rows, cols = where
    parts = _mlm_parts(model)
    if parts is not None:
        body, head = parts
        hidden = body(input_ids=ids, attention_mask=attn).last_hidden_state  # (B, L, H)
        return head_nll(head, hidden[rows, cols], labels[rows, cols])  # (N, V) in chunks
    logits = model(input_ids=ids, attention_mask=attn).logits[rows, cols]  # (N, V)
    return F.cross_entropy(logits.float(), labels[rows, cols], reduction="none")


@torch.inference_mode()
def masked_nll(
    model: torch.nn.Module,
    seqs: Sequence[Sequence[int]],
    masked: Sequence[Sequence[int]],
    *,
    pad_id: int,
    mask_id: int,
    batch_size: int,
    device: torch.device | str = "cpu",
    max_tokens: int = 8192,
) -> tuple[list[float], list[int]]:
    """Summed NLL (nats) of the tokens at the ``masked`` positions of each sequence, with
    those positions replaced by ``mask_id``, and their number, in input order."""
    nll = [0.0] * len(seqs)
    count = [len(m) for m in masked]
    was_training = model.training
    model.eval()
    parts, order = [], []
    for idx in length_batches([len(s) for s in seqs], batch_size, max_tokens):
        ids, attn = right_pad([seqs[i] for i in idx], pad_id)  # (B, L)
        chosen = torch.zeros(ids.shape, dtype=torch.bool)
        for row, i in enumerate(idx):
            chosen[row, list(masked[i])] = True
        labels = ids.clone()
        ids[chosen] = mask_id
        rows, cols = (t.to(device) for t in chosen.nonzero(as_tuple=True))  # on the host
        ids, attn, labels = (t.to(device) for t in (ids, attn, labels))
        tok = _masked_token_nll(model, ids, attn, (rows, cols), labels)  # (N,)
        sums = torch.zeros(len(idx), dtype=torch.float64, device=tok.device)
        parts.append(sums.index_add_(0, rows, tok.double()))
        order += idx
    if parts:  # read back once: the device never waits for the host between batches
        for i, value in zip(order, torch.cat(parts).tolist(), strict=True):
            nll[i] = value
    model.train(was_training)
    return nll, count


def mask_token_id(tokenizer: Any) -> int:
    """The tokenizer's mask token id; one line when it has none (a decoder's tokenizer)."""
    mask = getattr(tokenizer, "mask_token_id", None)
    if mask is None:
        raise PolymnesiaError(
            f"the masked-LM loss needs a tokenizer with a mask token; "
            f"{type(tokenizer).__name__} has none (use the causal-LM loss for a decoder)"
        )
    return int(mask)


def mlm_items(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    rate: float = MASK_RATE,
    seed: int = MASK_SEED,
    batch_size: int = 32,
    max_length: int = 512,
    device: torch.device | str | None = None,
    max_tokens: int = 8192,
    gather: bool = True,
    runtime: Runtime | None = None,
) -> tuple[LMStats, dict[str, list[float]]]:
    """Masked-LM statistics of ``texts`` and, per text in input order, ``nll``, ``tokens``
    (masked positions), ``bytes`` and ``words`` (empty when ``gather`` is False).

    ``runtime`` (default: the model's device, sharded over an initialised process
    group) splits the texts over processes as
    :func:`~polymnesia.evaluation.likelihood.lm_items` does; the masks depend only
    on ``(seed, text)``, so 1 and N processes give the same scores.
    """
    mask_id = mask_token_id(tokenizer)
    rt = runtime or default_runtime(model)
    mine = rt.shard(texts)
    seqs, cands, nbytes = encode_for_masking(tokenizer, mine, max_length)
    masked = [
        [c[j] for j in mask_positions(t, len(c), rate=rate, seed=seed)]
        for t, c in zip(mine, cands, strict=True)
    ]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    nll, count = (
        masked_nll(
            model,
            seqs,
            masked,
            pad_id=pad,
            mask_id=mask_id,
            batch_size=batch_size,
            device=device or rt.device,
            max_tokens=max_tokens,
        )
        if seqs
        else ([], [])
    )
    return collect(rt, mine, len(texts), nll, count, nbytes, gather=gather)
