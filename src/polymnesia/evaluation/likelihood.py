"""Per-language likelihood of held-out text: token perplexity and bits per byte.

Each text is scored as one sequence ``BOS + tokens`` (truncated at
``max_length``); the loss counts every text token (not BOS, and no EOS, as
lm-evaluation-harness' rolling log-likelihood). Token perplexity depends on the
tokenizer; bits per byte, ``sum NLL / (ln 2 * UTF-8 bytes)``, does not, so models
with different vocabularies (a merged 48k against a 32k base) compare fairly by
it. Under several processes the texts are sharded and the sums all-reduced.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.distributed.fsdp import FSDPModule

from polymnesia.metrics.lm import exp_or_inf
from polymnesia.runtime import Runtime, logit_chunk_rows
from polymnesia.tokenizers.encode import token_ids


@dataclass
class LMStats:
    nll: float  # summed negative log-likelihood, nats
    tokens: int
    bytes: int
    words: int

    @property
    def perplexity(self) -> float:
        return exp_or_inf(self.nll / max(1, self.tokens))

    @property
    def bits_per_byte(self) -> float:
        return self.nll / (math.log(2) * max(1, self.bytes))

    @property
    def word_perplexity(self) -> float:
        return exp_or_inf(self.nll / max(1, self.words))

    @property
    def loss(self) -> float:
        return self.nll / max(1, self.tokens)

    def total(self, metric: str) -> float | None:
        """``metric`` from these all-reduced sums, for the ``lm`` metrics that are ratios of
        them (the numbers ``evaluate_lm`` has always reported); None for any other, which a
        stage then computes by its registered rule on the items."""
        return {
            "perplexity": self.perplexity,
            "bits_per_byte": self.bits_per_byte,
            "word_perplexity": self.word_perplexity,
            "lm_loss": self.loss,
            "mlm_loss": self.loss,
        }.get(metric)


def head_nll(
    head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, rows: int | None = None
) -> torch.Tensor:
    """NLL ``(N,)`` of ``targets`` ``(N,)`` under ``head(hidden)``, ``hidden`` ``(N, H)``,
    made ``rows`` positions at a time (default: :func:`polymnesia.runtime.logit_chunk_rows`,
    a few MiB of logits on a CPU, a few hundred on an accelerator). Every position is scored
    on its own, so chunks change values only by the float rounding of the head's product."""
    out = torch.empty(targets.shape[0], dtype=torch.float32, device=hidden.device)
    if rows is None:
        vocab = getattr(head, "out_features", None) or head(hidden[:1]).shape[-1]
        rows = logit_chunk_rows(int(vocab), hidden.device)
    for start in range(0, targets.shape[0], rows):
        logits = head(hidden[start : start + rows]).float()
        out[start : start + rows] = F.cross_entropy(
            logits, targets[start : start + rows], reduction="none"
        )
    return out


def encode_for_scoring(
    tokenizer, texts: Sequence[str], max_length: int
) -> tuple[list[list[int]], list[int]]:
    """Token ids with BOS prepended, and the UTF-8 byte count each covers."""
    enc = token_ids(tokenizer, texts)
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    seqs, nbytes = [], []
    for text, ids in zip(texts, enc, strict=True):
        full = bos + list(ids)
        if len(full) > max_length:
            full = full[:max_length]
            nbytes.append(len(tokenizer.decode(full[len(bos) :]).encode("utf-8")))
        else:
            nbytes.append(len(text.encode("utf-8")))
        seqs.append(full)
    return seqs, nbytes


def _token_nll(
    model: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    where: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """NLL of every next token, ``(B, L-1)``.

    ``ids`` are right-padded. For standard decoders (a ``get_decoder()`` body and a
    linear LM head, no logit soft-capping) the body runs without a padding mask
    (causal attention already keeps real tokens from seeing the pads after them)
    and the LM head only on the positions that predict a real token, ``where``
    (row and column indices on the model's device, computed on the host so that
    the accelerator is never waited for; default: from ``mask``), a chunk of
    positions at a time (:func:`head_nll`); otherwise full logits with the mask.
    """
    targets = ids[:, 1:]
    valid = mask[:, 1:].bool()
    out = torch.zeros(targets.shape, dtype=torch.float32, device=ids.device)
    get_head = getattr(model, "get_output_embeddings", None)
    get_decoder = getattr(model, "get_decoder", None)
    head = get_head() if callable(get_head) else None
    softcap = getattr(getattr(model, "config", None), "final_logit_softcapping", None)
    # a model sharded by FSDP2 gathers its root's weights (embeddings, head) only in its own
    # forward pass: the body and the head are not called apart from it
    chunked = not isinstance(model, FSDPModule)
    if chunked and callable(get_decoder) and isinstance(head, torch.nn.Linear) and not softcap:
        # right padding: under the causal mask no real token attends to a later pad, so the
        # padding mask changes nothing that is scored and attention takes its fast causal path;
        # no key/value cache is built for a single pass
        rows, cols = where if where is not None else valid.nonzero(as_tuple=True)
        body = get_decoder()
        hidden = body(input_ids=ids, attention_mask=None, use_cache=False).last_hidden_state
        # the head only on positions with a target, in chunks: no (B, L, V) logits
        out[rows, cols] = head_nll(head, hidden[rows, cols], targets[rows, cols])
        return out
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]  # (B, L-1, V)
    flat = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    )
    return flat.view(targets.shape) * valid


def length_batches(
    lengths: Sequence[int], batch_size: int, max_tokens: int, max_padding: float = 0.1
) -> list[list[int]]:
    """Indices sorted by length, cut into batches of at most ``batch_size`` sequences and
    ``max_tokens`` padded tokens (so memory for the [B, L, V] logits stays bounded), and cut
    early where the next, longer sequence would make pads more than ``max_padding`` of the
    batch's real tokens (pads cost as much compute as real tokens)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        width = max(lengths[i], lengths[current[-1]] if current else 0)
        padded = (len(current) + 1) * width
        if current and (
            len(current) >= batch_size
            or padded > max_tokens
            or padded > (real + lengths[i]) * (1 + max_padding)
        ):
            batches.append(current)
            current, real = [], 0
        current.append(i)
        real += lengths[i]
    if current:
        batches.append(current)
    return batches


def right_pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, L)`` token ids right-padded with ``pad_id`` and their attention mask (1 = real)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = torch.tensor(s)
        mask[row, : len(s)] = 1
    return ids, mask


@torch.inference_mode()
def sequence_nll(
    model: torch.nn.Module,
    seqs: Sequence[Sequence[int]],
    *,
    pad_id: int,
    batch_size: int,
    device: torch.device | str = "cpu",
    max_tokens: int = 8192,
) -> tuple[list[float], list[int]]:
    """Summed NLL (nats) and number of predicted tokens for each sequence, in input order.

    Batches are built and counted on the host while the device works: the sums stay on the
    device and are read back once, at the end."""
    nll = [0.0] * len(seqs)
    count = [0] * len(seqs)
    was_training = model.training
    model.eval()
    parts, order = [], []
    for idx in length_batches([len(s) for s in seqs], batch_size, max_tokens):
        ids, mask = right_pad([seqs[i] for i in idx], pad_id)
        valid = mask[:, 1:].bool()
        rows, cols = valid.nonzero(as_tuple=True)
        where = (rows.to(device), cols.to(device))
        for row, n in enumerate(valid.sum(dim=1).tolist()):
            count[idx[row]] = n
        ids, mask = ids.to(device), mask.to(device)
        tok_nll = _token_nll(model, ids, mask, where)
        parts.append((tok_nll * mask[:, 1:].float()).sum(dim=1))  # zero where nothing predicted
        order += idx
    if parts:
        for i, value in zip(order, torch.cat(parts).tolist(), strict=True):
            nll[i] = value
    model.train(was_training)
    return nll, count


def default_runtime(model: torch.nn.Module) -> Runtime:
    """The model's device, sharded over the processes of an initialised process group; not
    for a model sharded by FSDP2 (an evaluation inside its training): its forward passes
    are collectives every process makes together, so each process scores every text."""
    import torch.distributed as dist

    device = next(model.parameters()).device
    if isinstance(model, FSDPModule):
        return Runtime(device=device)
    if dist.is_available() and dist.is_initialized():
        return Runtime(device=device, rank=dist.get_rank(), world=dist.get_world_size())
    return Runtime(device=device)


def lm_stats(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    max_length: int = 512,
    device: torch.device | str | None = None,
    max_tokens: int = 8192,
    runtime: Runtime | None = None,
) -> LMStats:
    """Likelihood statistics of ``texts`` (sharded over processes when distributed)."""
    stats, _ = lm_items(
        model,
        tokenizer,
        texts,
        batch_size=batch_size,
        max_length=max_length,
        device=device,
        max_tokens=max_tokens,
        gather=False,
        runtime=runtime,
    )
    return stats


def lm_items(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    max_length: int = 512,
    device: torch.device | str | None = None,
    max_tokens: int = 8192,
    gather: bool = True,
    runtime: Runtime | None = None,
) -> tuple[LMStats, dict[str, list[float]]]:
    """:func:`lm_stats` and, per text in input order, ``nll``, ``tokens``, ``bytes`` and ``words``.

    ``runtime`` (default: the model's device, sharded over an initialised
    process group) splits the texts over processes; the sums are all-reduced
    in float64 and the per-text columns (empty when ``gather`` is False)
    gathered back in input order, so 1 and N processes give the same scores.
    """
    rt = runtime or default_runtime(model)
    mine = rt.shard(texts)
    device = device or rt.device
    seqs, nbytes = encode_for_scoring(tokenizer, mine, max_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    nll, count = (
        sequence_nll(
            model, seqs, pad_id=pad, batch_size=batch_size, device=device, max_tokens=max_tokens
        )
        if seqs
        else ([], [])
    )
    return collect(rt, mine, len(texts), nll, count, nbytes, gather=gather)


def collect(
    rt: Runtime,
    mine: Sequence[str],
    n: int,
    nll: Sequence[float],
    count: Sequence[int],
    nbytes: Sequence[int],
    *,
    gather: bool,
) -> tuple[LMStats, dict[str, list[float]]]:
    """Sums over every process (float64) and, with ``gather``, the per-text columns ``nll``,
    ``tokens``, ``bytes``, ``words`` of all ``n`` texts in input order; ``mine`` and the
    lists are this process's shard (:meth:`Runtime.shard`)."""
    words = [len(t.split()) for t in mine]
    tot = rt.sum([sum(nll), float(sum(count)), float(sum(nbytes)), float(sum(words))])
    stats = LMStats(nll=tot[0], tokens=int(tot[1]), bytes=int(tot[2]), words=int(tot[3]))
    if not gather:
        return stats, {}
    rows = rt.gather(list(zip(nll, count, nbytes, words, strict=True)), n)
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), ()]
    keys = ("nll", "tokens", "bytes", "words")
    return stats, {k: [float(v) for v in col] for k, col in zip(keys, cols, strict=True)}
