"""Initialisations from static embeddings of the new language's text: FOCUS (Dobler & de
Melo 2023) and Orthogonal Matching Pursuit, with the PPMI + truncated-SVD embeddings they
read (:func:`static_embeddings`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from polymnesia.models.new_tokens.base import (
    NewTokens,
    StaticEmbeddings,
    mean_init,
    register_init,
)

#: non-zero coefficients per new token in ``omp``
OMP_ATOMS = 8


def static_embeddings(
    sequences: Sequence[Sequence[int]],
    vocab_size: int,
    *,
    dim: int = 64,
    window: int = 4,
    min_count: int = 2,
    alpha: float = 0.75,
    seed: int = 0,
) -> StaticEmbeddings:
    """Count-based static vectors (Levy, Goldberg & Dagan 2015): positive PMI of token
    co-occurrence within ``window`` positions (context distribution smoothed by ``alpha``),
    then ``U sqrt(S)`` of its truncated SVD. Deterministic for a ``seed``."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    for seq in sequences:
        x = np.asarray(seq, dtype=np.int64)
        counts += np.bincount(x, minlength=vocab_size)[:vocab_size]
        for o in range(1, window + 1):
            if len(x) > o:
                rows += [x[:-o], x[o:]]
                cols += [x[o:], x[:-o]]
    known = counts >= min_count
    vectors = np.zeros((vocab_size, dim), dtype=np.float32)
    keep = np.flatnonzero(known)
    if len(keep) >= 2 and rows:
        r, c = np.concatenate(rows), np.concatenate(cols)
        both = known[r] & known[c]
        remap = np.full(vocab_size, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        n = len(keep)
        co = sp.coo_matrix(
            (np.ones(int(both.sum())), (remap[r[both]], remap[c[both]])), shape=(n, n)
        ).tocsr()
        co.sum_duplicates()
        total = co.sum()
        w = np.asarray(co.sum(axis=1)).ravel()
        cs = np.asarray(co.sum(axis=0)).ravel() ** alpha
        pc = cs / cs.sum()
        coo = co.tocoo()
        pmi = np.log(coo.data / total) - np.log(w[coo.row] / total) - np.log(pc[coo.col])
        pos = pmi > 0
        ppmi = sp.csr_matrix((pmi[pos], (coo.row[pos], coo.col[pos])), shape=(n, n))
        k = min(dim, n - 1)
        if n <= 2 * dim + 2:
            u, s, _ = np.linalg.svd(ppmi.toarray())
            u, s = u[:, :k], s[:k]
        else:
            from scipy.sparse.linalg import svds

            v0 = np.random.default_rng(seed).standard_normal(n)
            u, s, _ = svds(ppmi, k=k, v0=v0)
            order = np.argsort(-s)
            u, s = u[:, order], s[order]
        sign = np.sign(u[np.abs(u).argmax(axis=0), np.arange(u.shape[1])])
        vectors[keep, : u.shape[1]] = (u * sign * np.sqrt(s)).astype(np.float32)
    return StaticEmbeddings(torch.from_numpy(vectors), torch.from_numpy(counts), min_count)


def _overlap_and_targets(tokens: NewTokens) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Old tokens with a static vector, and (positions in ``ids``, ids) of new ones with one."""
    st = tokens.static
    assert st is not None
    known = st.known() & (st.vectors.float().norm(dim=1) > 0)
    overlap = torch.nonzero(known[: tokens.n_ref]).flatten()
    ids = torch.tensor(tokens.ids, dtype=torch.long)
    has = known[ids] if len(ids) else torch.zeros(0, dtype=torch.bool)
    pos = torch.nonzero(has).flatten()
    return overlap, pos, ids[pos]


def sparsemax(z: torch.Tensor) -> torch.Tensor:
    """Sparsemax over the last dimension (Martins & Astudillo 2016): the Euclidean projection
    onto the probability simplex; weights sum to one, most are exactly zero."""
    zs, _ = torch.sort(z, dim=-1, descending=True)
    cum = zs.cumsum(dim=-1)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
    support = (1 + k * zs) > cum
    k_z = support.sum(dim=-1, keepdim=True)
    tau = (cum.gather(-1, k_z - 1) - 1) / k_z.to(z.dtype)
    return (z - tau).clamp(min=0)


def sparsemax_topk(z: torch.Tensor, k: int = 256) -> torch.Tensor:
    """:func:`sparsemax` of each row computed from its ``k`` largest entries: exact whenever
    the support is smaller than ``k`` (the entries left out are then below the threshold);
    rows whose support fills all ``k`` are redone in full."""
    if k >= z.shape[-1]:
        return sparsemax(z)
    top, idx = z.topk(k, dim=-1)
    p_top = sparsemax(top)
    out = torch.zeros_like(z).scatter_(-1, idx, p_top)
    full = p_top[..., -1] > 0
    if full.any():
        out[full] = sparsemax(z[full])
    return out


def focus_weights(
    targets: torch.Tensor, dictionary: torch.Tensor, *, chunk: int = 1024
) -> torch.Tensor:
    """``[T, O]`` FOCUS weights: sparsemax of cosine similarities of each target static vector
    to the old tokens' static vectors (rows sum to one)."""
    t = torch.nn.functional.normalize(targets.double(), dim=1)
    d = torch.nn.functional.normalize(dictionary.double(), dim=1)
    out = [sparsemax_topk(t[i : i + chunk] @ d.T) for i in range(0, len(t), chunk)]
    return torch.cat(out) if out else torch.zeros((0, len(d)), dtype=torch.float64)


@register_init(
    "focus", "FOCUS: sparsemax-weighted old tokens similar in static embeddings", ["static"]
)
def focus_init(old: torch.Tensor, tokens: NewTokens) -> torch.Tensor:
    assert tokens.static is not None
    rows = mean_init(old, tokens).double()
    overlap, pos, ids = _overlap_and_targets(tokens)
    if len(overlap) and len(pos):
        w = focus_weights(tokens.static.vectors[ids], tokens.static.vectors[overlap])
        rows[pos] = w.to(old.device) @ old[overlap].double()
    return rows


def omp(
    dictionary: torch.Tensor, targets: torch.Tensor, k: int, *, tol: float = 1e-10
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched Orthogonal Matching Pursuit: for each target row ``y`` pick at most ``k`` rows
    of ``dictionary`` greedily (largest ``|<residual, atom>| / |atom|``) and refit all picked
    coefficients by least squares after each pick; stop early once the residual is below
    ``tol * |y|``. Returns ``(indices, coefficients)``, ``[T, k]`` each (index -1, coefficient
    0 where a row stopped early)."""
    d = dictionary.double()
    y = targets.double()
    unit = (d / d.norm(dim=1).clamp(min=1e-300)[:, None]).float()  # for picking atoms only
    k = min(k, len(d))
    n = len(y)
    idx = torch.full((n, k), -1, dtype=torch.long)
    coef = torch.zeros((n, k), dtype=torch.float64)
    active = torch.arange(n)
    resid = y.clone()
    for s in range(k):
        if not len(active):
            break
        corr = (resid[active].float() @ unit.T).abs()
        if s:
            corr.scatter_(1, idx[active, :s], -1.0)
        idx[active, s] = corr.argmax(dim=1)
        atoms = d[idx[active, : s + 1]]  # [A, s+1, D]
        gram = atoms @ atoms.transpose(1, 2)  # least squares by the normal equations
        rhs = atoms @ y[active].unsqueeze(2)
        sol = torch.linalg.lstsq(gram, rhs).solution if s else rhs / gram
        coef[active, : s + 1] = sol.squeeze(2)
        resid[active] = y[active] - (atoms.transpose(1, 2) @ sol).squeeze(2)
        small = resid[active].norm(dim=1) <= tol * y[active].norm(dim=1).clamp(min=1e-300)
        active = active[~small]
    return idx, coef


@register_init(
    "omp", "Orthogonal Matching Pursuit over old tokens' static vectors (k-sparse)", ["static"]
)
def omp_init(
    old: torch.Tensor, tokens: NewTokens, *, k: int = OMP_ATOMS, chunk: int = 2048
) -> torch.Tensor:
    assert tokens.static is not None
    rows = mean_init(old, tokens).double()
    overlap, pos, ids = _overlap_and_targets(tokens)
    if len(overlap) and len(pos):
        dic = tokens.static.vectors[overlap]
        ref = old[overlap].double().cpu()
        for i in range(0, len(pos), chunk):
            sel, c = omp(dic, tokens.static.vectors[ids[i : i + chunk]], k)
            mixed = (c.unsqueeze(2) * ref[sel.clamp(min=0)]).sum(dim=1)
            rows[pos[i : i + chunk]] = mixed.to(rows.device)
    return rows
