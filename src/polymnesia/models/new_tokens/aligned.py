"""Initialisations from aligned text: trans-tokenization (Remy et al. 2024; IBM Model 1 on
verse-aligned text, :func:`ibm1_alignment`) and WECHSEL (Minixhofer et al. 2022; static
embeddings of both languages aligned by orthogonal Procrustes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.models.new_tokens.base import (
    Alignment,
    NewTokens,
    mean_init,
    register_init,
)

#: WECHSEL's neighbours per new token and softmax temperature (Minixhofer et al. 2022, 4.1)
WECHSEL_K = 10
WECHSEL_TEMPERATURE = 0.1


def ibm1_alignment(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    n_source: int,
    n_target: int,
    *,
    rounds: int = 5,
) -> Alignment:
    """IBM Model 1 (Brown et al. 1993) with a NULL source token, trained by ``rounds`` EM
    rounds from uniform translation probabilities t(target | source), on ``(source ids,
    target ids)`` sentence pairs. Returns the expected alignment counts of the last E-step.

    Vectorised over all token-type pairs of every sentence pair: a sentence pair with
    ``n_f`` occurrences of target ``f`` and ``n_e`` of source ``e`` adds
    ``n_f n_e t(f|e) / sum_e' n_e' t(f|e')`` to ``c(f, e)``.
    """
    null = n_source
    keys_l, row_l, weight_l, nf_l = [], [], [], []
    rowbase = 0
    for src, tgt in pairs:
        if not len(tgt):
            continue
        e, ne = np.unique(np.asarray([*src, null], dtype=np.int64), return_counts=True)
        f, nf = np.unique(np.asarray(tgt, dtype=np.int64), return_counts=True)
        keys_l.append((f[:, None] * (n_source + 1) + e[None, :]).ravel())
        row_l.append(np.repeat(np.arange(rowbase, rowbase + len(f)), len(e)))
        weight_l.append(np.tile(ne, len(f)).astype(np.float64))
        nf_l.append(nf.astype(np.float64))
        rowbase += len(f)
    if not keys_l:
        return Alignment(sp.csr_matrix((n_target, n_source)))
    keys = np.concatenate(keys_l)
    row = np.concatenate(row_l)
    ne_w = np.concatenate(weight_l)
    nf_row = np.concatenate(nf_l)
    support, pair = np.unique(keys, return_inverse=True)
    sup_f, sup_e = support // (n_source + 1), support % (n_source + 1)
    t: np.ndarray = np.ones(len(support))
    counts: np.ndarray = np.zeros(len(support))
    for _ in range(rounds):
        tp = t[pair] * ne_w
        z = np.bincount(row, weights=tp, minlength=rowbase)
        post = nf_row[row] * tp / z[row]
        counts = np.bincount(pair, weights=post, minlength=len(support))
        per_e = np.bincount(sup_e, weights=counts, minlength=n_source + 1)
        t = counts / per_e[sup_e]
    real = sup_e < n_source
    mat = sp.csr_matrix((counts[real], (sup_f[real], sup_e[real])), shape=(n_target, n_source))
    return Alignment(mat)


@register_init(
    "align", "trans-tokenization: weighted mean of the old tokens it aligns to", ["alignment"]
)
def align_init(old: torch.Tensor, tokens: NewTokens) -> torch.Tensor:
    assert tokens.alignment is not None
    rows = mean_init(old, tokens).double()
    mat = tokens.alignment.counts
    n_ref = tokens.n_ref
    ids = np.asarray(tokens.ids, dtype=np.int64)
    inside = np.flatnonzero(ids < mat.shape[0])
    sub = sp.csr_matrix(mat[ids[inside]][:, :n_ref])  # counts over the reference rows only
    total = np.asarray(sub.sum(axis=1)).ravel()
    has = total > 0
    weights = sp.diags(np.where(has, 1.0 / np.where(has, total, 1.0), 0.0)) @ sub
    mixed = torch.from_numpy(np.asarray(weights @ old[:n_ref].double().cpu().numpy()))
    keep = torch.from_numpy(inside[has])
    rows[keep] = mixed[torch.from_numpy(has)].to(rows.device)
    return rows


# --- WECHSEL: aligned static embeddings ---------------------------------------------------------


def procrustes(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The orthogonal ``W`` minimising ``|x W - y|_F`` (Schönemann 1966): ``U V^T`` of the SVD
    of ``x^T y``."""
    u, _, vt = torch.linalg.svd(x.double().T @ y.double())
    return u @ vt


def wechsel_weights(
    sim: torch.Tensor, k: int = WECHSEL_K, temperature: float = WECHSEL_TEMPERATURE
) -> torch.Tensor:
    """``[T, S]`` weights: softmax of ``sim / temperature`` over each row's ``k`` largest
    entries, zero elsewhere (rows sum to one)."""
    k = min(k, sim.shape[-1])
    top, idx = sim.topk(k, dim=-1)
    return torch.zeros_like(sim).scatter_(-1, idx, torch.softmax(top / temperature, dim=-1))


@register_init(
    "wechsel",
    "WECHSEL: softmax over the nearest old tokens in Procrustes-aligned static embeddings",
    ["static", "source_static"],
)
def wechsel_init(
    old: torch.Tensor,
    tokens: NewTokens,
    *,
    k: int = WECHSEL_K,
    temperature: float = WECHSEL_TEMPERATURE,
    chunk: int = 1024,
) -> torch.Tensor:
    """Maps the new language's static space onto the pretraining languages' by orthogonal
    Procrustes fitted on the anchor tokens (old tokens with a vector in both spaces: the
    identical-strings dictionary, as no bilingual dictionary is available offline), then gives
    each new token with a vector the softmax-weighted mean of the base rows of its ``k`` most
    cosine-similar old tokens in the pretraining languages' space."""
    tgt, src = tokens.static, tokens.source_static
    assert tgt is not None and src is not None
    if tgt.vectors.shape[1] != src.vectors.shape[1]:
        raise PolymnesiaError(
            f"wechsel: static embeddings of {tgt.vectors.shape[1]} and "
            f"{src.vectors.shape[1]} dimensions cannot be aligned"
        )
    rows = mean_init(old, tokens).double()
    n_ref = tokens.n_ref
    has_t = tgt.known() & (tgt.vectors.float().norm(dim=1) > 0)
    has_s = src.known()[:n_ref] & (src.vectors[:n_ref].float().norm(dim=1) > 0)
    anchors = torch.nonzero(has_t[:n_ref] & has_s).flatten()
    dictionary = torch.nonzero(has_s).flatten()
    ids = torch.tensor(tokens.ids, dtype=torch.long)
    pos = torch.nonzero(has_t[ids]).flatten() if len(ids) else ids
    if not len(anchors) or not len(dictionary) or not len(pos):
        return rows
    w = procrustes(tgt.vectors[anchors], src.vectors[anchors])
    d = torch.nn.functional.normalize(src.vectors[dictionary].double(), dim=1)
    ref = old[dictionary].double().cpu()
    for i in range(0, len(pos), chunk):
        sel = pos[i : i + chunk]
        mapped = torch.nn.functional.normalize(tgt.vectors[ids[sel]].double() @ w, dim=1)
        weights = wechsel_weights(mapped @ d.T, k, temperature)
        rows[sel] = (weights @ ref).to(rows.device)
    return rows
