"""The training loss of causal decoders without ``(B, L, V)`` logits.

A decoder's own loss makes the logits of every position at once, upcasts them to
float32, takes their log-softmax and, in the backward pass, a gradient of the same
size: at a 256k vocabulary and 16k tokens per micro-batch that is tens of GB, more
than the model. :func:`linear_cross_entropy` runs the LM head and the
cross-entropy together a chunk of positions at a time (as torchtune's chunked and
Liger's fused linear cross-entropy do): each chunk's logits are made, turned into
the loss and into their gradient with respect to the hidden states and the head's
weight (``softmax - one_hot``, the closed form), and dropped. The backward pass
only scales the gradients kept. The value is the decoder's own loss: the mean
negative log-likelihood of the next token over the positions whose label is not
``-100`` (transformers' ``ForCausalLMLoss``), equal up to float rounding.

:func:`chunked_head` says when it applies: decoders whose forward pass ends in
``logits = lm_head(hidden)`` with nothing after it (:data:`ARCHITECTURES`; not
Gemma 2's soft-capped logits, not a LoRA-wrapped head), trained on one device or
under DDP, not compiled. The model still runs its own forward pass (so DDP and
PEFT wrappers see it), with the head passing the hidden states through
(:func:`head_passes_through`).

Other terms of the loss that are functions of the logits (LwF's distillation to a teacher's
outputs) are added in the same pass as :class:`LogitTerm` objects: each chunk's logits are
made once and give both the cross-entropy and the terms, with their gradients summed before
the head's products (so the student's head runs once per chunk, forward and backward).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from polymnesia.models import anatomy
from polymnesia.runtime import logit_chunk_rows

IGNORE = -100  # transformers' ignore_index for labels
#: ``config.model_type`` of decoders whose ``*ForCausalLM.forward`` computes
#: ``logits = lm_head(hidden)`` and changes nothing after it (checked against
#: transformers' modelling code; each is tested against the model's own loss)
ARCHITECTURES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma", "gpt2", "phi3", "olmo"})
#: ``model_type`` -> its causal-LM class name (``LlamaForCausalLM``, ``GPT2LMHeadModel``)
CAUSAL_LM_CLASSES: dict[str, str] = {
    k: v for k, v in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if k in ARCHITECTURES
}


def chunked_head(model: torch.nn.Module) -> torch.nn.Linear | None:
    """The LM head of a decoder whose training loss can be made in chunks, or None."""
    inner = anatomy.unwrap(model)
    config = getattr(inner, "config", None)
    kind = getattr(config, "model_type", None)
    if kind not in ARCHITECTURES or type(inner).__name__ != CAUSAL_LM_CLASSES.get(kind):
        return None  # another architecture, or another head (a classifier)
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return None
    head = anatomy.output_embeddings(inner)
    if type(head) is not torch.nn.Linear:  # a LoRA-wrapped head is not
        return None
    if hasattr(head, "_hf_hook") or "forward" in vars(head):
        return None  # its forward is already replaced (Accelerate's device-map hooks)
    return head


def _pass_through(hidden: torch.Tensor) -> torch.Tensor:
    return hidden


@contextlib.contextmanager
def head_passes_through(head: torch.nn.Module) -> Iterator[None]:
    """While inside, ``head(x)`` returns ``x``: the model's forward pass returns its final
    hidden states as ``logits``."""
    head.forward = _pass_through
    try:
        yield
    finally:
        del head.forward  # back to the class's forward


class LogitTerm:
    """A term of the training loss that is a function of the logits, added by
    :func:`linear_cross_entropy` beside the cross-entropy a chunk of positions at a time, from
    the same chunk of logits. Positions are the flattened ``(B, L)`` positions of the batch
    (row ``i`` is example ``i // L``, position ``i % L``)."""

    #: float32 ``(rows, V)`` tensors the term holds at once beside the chunk's logits: the
    #: chunks shrink so that their memory stays within the chunk budget
    buffers: int = 1

    def chunk(
        self, start: int, logits: torch.Tensor, grad_scale: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The term's share of the loss from positions ``start : start + len(logits)``
        (``logits``: their float32 ``(n, V)`` logits, not to be changed): a float32 scalar,
        and unless ``grad_scale`` is None its gradient with respect to ``logits`` times
        ``grad_scale`` (a 0-dim tensor: the chunked loss keeps its gradients scaled by its
        count of targets), a new float32 ``(n, V)`` tensor that the caller may change."""
        raise NotImplementedError


def head_dtype(weight: torch.Tensor, device: torch.device) -> torch.dtype:
    """The dtype an LM head's products run in: autocast's where it is on, else the weight's."""
    kind = device.type
    return torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else weight.dtype


def final_hidden(
    model: torch.nn.Module, head: torch.nn.Linear, batch: dict[str, torch.Tensor]
) -> torch.Tensor:
    """The ``(B, L, H)`` final hidden states of ``model`` on ``batch`` (without ``labels``):
    its own forward pass, with ``head`` (:func:`chunked_head`) passing them through."""
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with head_passes_through(head):
        hidden: torch.Tensor = model(**inputs).logits
    return hidden


def causal_lm_loss(
    model: torch.nn.Module,
    batch: dict[str, torch.Tensor],
    head: torch.nn.Linear | None,
    rows: int | None = None,
    terms: Sequence[LogitTerm] = (),
) -> torch.Tensor:
    """The decoder's training loss of ``batch`` (``input_ids``, ``labels``, ...), made with
    :func:`linear_cross_entropy` when ``head`` is given (:func:`chunked_head`), else the
    model's own ``loss``; ``terms`` are added in the chunks (they need ``head``)."""
    if head is None or "labels" not in batch:
        if terms:
            raise ValueError(
                "logit terms are made in the chunked loss: give the LM head and labels"
            )
        return model(**batch).loss
    hidden = final_hidden(model, head, batch)
    labels = batch["labels"]
    targets = F.pad(labels[:, 1:], (0, 1), value=IGNORE)  # position i predicts token i + 1
    width = head.out_features * (1 + sum(t.buffers for t in terms))
    rows = rows or logit_chunk_rows(width, hidden.device)
    return linear_cross_entropy(
        hidden.reshape(-1, hidden.shape[-1]),
        head.weight,
        head.bias,
        targets.reshape(-1),
        rows,
        terms,
    )


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    rows: int,
    terms: Sequence[LogitTerm] = (),
) -> torch.Tensor:
    """``cross_entropy(hidden @ weight.T + bias, targets)``, mean over targets that are not
    ``-100`` (NaN when there are none, as torch's), made ``rows`` positions at a time, plus
    each of ``terms`` on the same logits.

    ``hidden`` ``(N, H)``, ``weight`` ``(V, H)``, ``bias`` ``(V,)`` or None, ``targets``
    ``(N,)``. Under autocast the head's products run in the autocast dtype, as the model's
    head would; the softmax, the loss and the weight's gradient sums are float32.
    """
    return _LinearCrossEntropy.apply(hidden, weight, bias, targets, rows, tuple(terms))


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        rows: int,
        terms: tuple[LogitTerm, ...],
    ) -> torch.Tensor:
        kind = hidden.device.type
        dtype = head_dtype(weight, hidden.device)
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        need_b = need_b and bias is not None
        need = need_h or need_w or need_b
        with torch.autocast(kind, enabled=False):
            w = weight.to(dtype)
            b = bias.to(dtype) if bias is not None else None
            dev = weight.device
            grad_h = torch.empty_like(hidden) if need_h else None
            grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=dev) if need_w else None
            grad_b = (
                torch.zeros(weight.shape[0], dtype=torch.float32, device=dev) if need_b else None
            )
            valid = targets != IGNORE
            count = valid.sum()
            total = torch.zeros((), dtype=torch.float32, device=hidden.device)
            extra = torch.zeros((), dtype=torch.float32, device=hidden.device)
            for start in range(0, targets.shape[0], rows):
                h = hidden[start : start + rows].to(dtype)
                v = valid[start : start + rows]
                t = torch.where(v, targets[start : start + rows], 0)
                logits = F.linear(h, w, b).float()
                # the terms' gradients are kept scaled by ``count``, as the cross-entropy's
                # are (the backward pass divides all of them by it)
                term_grads = []
                for term in terms:
                    value, term_grad = term.chunk(start, logits, count if need else None)
                    extra += value
                    if term_grad is not None:
                        term_grads.append(term_grad)
                lse = torch.logsumexp(logits, dim=-1)
                picked = logits.gather(1, t[:, None]).squeeze(1)
                total += torch.where(v, lse - picked, 0.0).sum()
                if not need:
                    continue
                g = logits.sub_(lse[:, None]).exp_()  # softmax, in place
                g[torch.arange(t.shape[0], device=t.device), t] -= 1.0
                g.mul_(v[:, None])  # ignored positions give no gradient
                for term_grad in term_grads:
                    g += term_grad
                if grad_b is not None:
                    grad_b += g.sum(0)
                g_low = g.to(dtype)
                if grad_h is not None:
                    grad_h[start : start + rows] = (g_low @ w).to(hidden.dtype)
                if grad_w is not None:
                    if dtype == torch.float32:
                        grad_w.addmm_(g_low.t(), h)
                    else:
                        grad_w += (g_low.t() @ h).float()
        ctx.save_for_backward(grad_h, grad_w, grad_b, count)
        ctx.dtypes = (weight.dtype, bias.dtype if bias is not None else None)
        return total / count + extra if terms else total / count

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        # the kept gradients are scaled in place (no second copy of a vocabulary-sized
        # gradient): one backward pass per forward, as in training
        grad_h, grad_w, grad_b, count = ctx.saved_tensors
        scale = grad_out.float() / count
        w_dtype, b_dtype = ctx.dtypes
        return (
            grad_h.mul_(scale.to(grad_h.dtype)) if grad_h is not None else None,
            grad_w.mul_(scale).to(w_dtype) if grad_w is not None else None,
            grad_b.mul_(scale).to(b_dtype) if grad_b is not None else None,
            None,
            None,
            None,
        )
