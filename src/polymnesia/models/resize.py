"""A model's vocabulary resized for an expanded tokenizer (Aggarwal et al. 2024's vocabulary
expansion): :func:`resize_and_init` grows the input embeddings (and an untied LM head) to
the merged tokenizer, padded as the model pads (:func:`padding_multiple`), writes the new
rows with a registered initialisation (:mod:`polymnesia.models.new_tokens`) and keeps or
re-initialises the head; :func:`check_resizable` refuses a model without resizable
embeddings in one line. The ``adapt_vocabulary`` stage calls it."""

from __future__ import annotations

from typing import Any

import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.models.build import Resizable
from polymnesia.models.new_tokens import (
    Alignment,
    NewTokens,
    StaticEmbeddings,
    initialise,
)


def check_resizable(model: torch.nn.Module) -> Resizable:
    """``model`` if its embeddings can be resized; else one line."""
    emb = model.get_input_embeddings() if isinstance(model, Resizable) else None
    if (
        not isinstance(model, Resizable)
        or emb is None
        or not isinstance(getattr(emb, "weight", None), torch.Tensor)
    ):
        raise PolymnesiaError(
            f"{type(model).__name__} has no resizable input embeddings; vocabulary expansion needs "
            "a transformers model with resize_token_embeddings (e.g. Mistral, Llama)"
        )
    return model


def padding_multiple(rows: int, n_base: int) -> int | None:
    """The multiple a model pads its embedding matrix to, or None if it does not pad.

    A matrix with more rows than the tokenizer has entries (Qwen2/2.5/3: 151,936 rows for
    151,665 entries; Phi-3: 32,064 for 32,011; OLMo-2: 100,352 for 100,278) is padded: the
    multiple is the largest power of two dividing the row count, at most 128.
    """
    if rows <= n_base:
        return None
    multiple = 1
    while rows % (multiple * 2) == 0 and multiple < 128:
        multiple *= 2
    return multiple


def new_ids(merged: Any, first_new_id: int) -> tuple[int, ...]:
    """The merged tokenizer's ids from ``first_new_id`` on (the tokens the expansion added)."""
    return tuple(sorted(i for i in merged.get_vocab().values() if i >= first_new_id))


@torch.no_grad()
def resize_and_init(
    model: torch.nn.Module,
    merged: Any,
    base: Any,
    first_new_id: int,
    init: str,
    *,
    head: str,
    seed: int = 0,
    pad_to_multiple_of: int | None = None,
    static: StaticEmbeddings | None = None,
    alignment: Alignment | None = None,
    source_static: StaticEmbeddings | None = None,
) -> None:
    """Give the new ids rows, initialise them, keep or replace the head.

    The base vocabulary is ``len(base)``, not the embedding's row count: a padded matrix
    (more rows than tokenizer entries) keeps its padding convention. New ids first reuse the
    padding rows; the matrix grows only when they do not fit, to a multiple of
    ``pad_to_multiple_of`` (default: the multiple the model padded to,
    :func:`padding_multiple`; 1 for none). Old rows stay bit-identical and untouched padding
    rows too. See the module docstring (step 3) for ``head``; ``init`` names an entry of
    :data:`polymnesia.models.new_tokens.INITS`, ``static`` and ``alignment`` its side data;
    ``seed`` draws the replaced head and random initialisations (the same on every process).
    """
    hf = check_resizable(model)
    n_base = len(base)
    emb_w = hf.get_input_embeddings().weight
    rows = emb_w.shape[0]
    if rows < n_base:
        raise PolymnesiaError(
            f"{type(model).__name__} has {rows} embedding rows for a tokenizer of {n_base} tokens"
        )
    emb_old = emb_w.detach()[:n_base].clone()
    out = hf.get_output_embeddings()
    tied = out is not None and out.weight is emb_w
    if head == "reinit" and (out is None or tied):
        raise ConfigError(
            "head: reinit replaces the LM head, but this model's head is tied to its embeddings "
            "(or absent), whose old rows stay frozen; use head: keep for tied models"
        )
    head_old = out.weight.detach()[:n_base].clone() if out is not None and not tied else None
    ids = new_ids(merged, first_new_id)
    needed = max(len(merged), ids[-1] + 1 if ids else 0)
    multiple = pad_to_multiple_of if pad_to_multiple_of else padding_multiple(rows, n_base)
    if needed > rows:
        target = -(-needed // multiple) * multiple if multiple else needed
        try:
            hf.resize_token_embeddings(target, mean_resizing=False)
        except (NotImplementedError, AttributeError, TypeError) as e:
            raise PolymnesiaError(
                f"cannot resize the embeddings of {type(model).__name__}: {str(e).splitlines()[0]}"
            ) from None
    tokens = NewTokens(base, merged, first_new_id, ids, static, alignment, seed, source_static)
    emb = hf.get_input_embeddings().weight
    emb[:n_base] = emb_old
    index = torch.tensor(ids, dtype=torch.long)
    emb[index] = initialise(init, emb_old, tokens)
    if head == "reinit":
        _reinit_head(hf, seed)
    elif head_old is not None:
        head_now = hf.get_output_embeddings()
        assert head_now is not None  # head_old was read from it
        w = head_now.weight
        w[:n_base] = head_old  # never let a resize re-initialise the old head rows
        head_tokens = NewTokens(
            base, merged, first_new_id, ids, static, alignment, seed + 1, source_static
        )
        w[index] = initialise(init, head_old, head_tokens)


def _reinit_head(model: Resizable, seed: int) -> None:
    """Draw every LM-head row from N(0, initializer_range) and zero its bias (Aggarwal et al. 2024:
    replaced).
    """
    out = model.get_output_embeddings()
    assert out is not None  # head: reinit refuses a model without a head
    std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02))
    gen = torch.Generator().manual_seed(seed)
    draw = torch.randn(tuple(out.weight.shape), generator=gen, dtype=torch.float32) * std
    out.weight.copy_(draw.to(out.weight.dtype))
    if getattr(out, "bias", None) is not None:
        torch.nn.init.zeros_(out.bias)
