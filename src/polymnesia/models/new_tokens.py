"""Initialisations of new-token embedding rows (vocabulary expansion, paper 000; issue 26).

Each initialisation is a pure function registered in :data:`INITS`:
``fn(old, tokens) -> rows``. ``old`` holds the base vocabulary's rows
(``[len(base tokenizer), d]``, embeddings or LM head), ``tokens``
(:class:`NewTokens`) the base and merged tokenizers, the new ids and any side
data; ``rows`` is ``[len(tokens.ids), d]``, row ``i`` for merged id
``tokens.ids[i]``. Nothing here touches a model: resizing and writing the rows
is :func:`polymnesia.stages.adapt_vocabulary.resize_and_init`.

========================  ===================================================
``mean``                  every new row is the mean of the base rows
``subtoken_mean``         mean of the base rows of the token's base tokenization
``normal``                multivariate normal around the mean with the base
                          rows' covariance times 1e-9 (transformers'
                          ``mean_resizing``, Hewitt 2021)
``focus``                 FOCUS (Dobler & de Melo 2023): sparsemax over the
                          cosine similarities, in static embeddings of the new
                          language, to the old tokens seen in its text
``omp``                   Orthogonal Matching Pursuit (as in tokenizer-transplant
                          tools): a k-sparse least-squares fit of the new token's
                          static vector by old tokens' static vectors, the same
                          coefficients applied to the old rows
``align``                 trans-tokenization (Remy et al. 2024): IBM Model 1 on
                          verse-aligned text; the weighted mean of the old rows
                          the new token aligns to
``wechsel``               WECHSEL (Minixhofer et al. 2022): static embeddings of
                          the new and the old languages aligned by orthogonal
                          Procrustes; softmax (temperature 0.1) over the 10 most
                          similar old tokens
========================  ===================================================

Side data: :func:`static_embeddings` (PPMI + truncated SVD on the new
language's text tokenized with the merged tokenizer) for ``focus``, ``omp``
and ``wechsel``; the same on the pretraining languages' text tokenized with
the base tokenizer (``source_static``) for ``wechsel``; :func:`ibm1_alignment`
for ``align``. A token without side data (not
seen in the text, never aligned) falls back to the mean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.registry import Registry

#: transformers' ``mean_resizing`` scales the old rows' covariance by this (Hewitt 2021)
NORMAL_SCALE = 1e-9
#: non-zero coefficients per new token in ``omp``
OMP_ATOMS = 8
#: WECHSEL's neighbours per new token and softmax temperature (Minixhofer et al. 2022, 4.1)
WECHSEL_K = 10
WECHSEL_TEMPERATURE = 0.1


@dataclass(frozen=True)
class StaticEmbeddings:
    """Static vectors of the merged vocabulary learned on the new language's text.

    ``vectors[i]`` is token ``i``'s vector (zero if ``counts[i] < min_count``);
    ``counts[i]`` how often it occurs in the text.
    """

    vectors: torch.Tensor
    counts: torch.Tensor
    min_count: int = 1

    def known(self) -> torch.Tensor:
        return self.counts >= self.min_count


@dataclass(frozen=True)
class Alignment:
    """Expected IBM Model 1 alignment counts: ``counts[t, s]`` of target (merged) token ``t``
    aligned to source (base) token ``s``, NULL alignments left out."""

    counts: sp.csr_matrix


@dataclass(frozen=True)
class NewTokens:
    """What an initialisation knows: tokenizers, the ids to initialise, side data."""

    base: Any
    merged: Any
    first_new_id: int
    ids: tuple[int, ...]
    static: StaticEmbeddings | None = None
    alignment: Alignment | None = None
    seed: int = 0
    source_static: StaticEmbeddings | None = None

    @property
    def n_ref(self) -> int:
        """How many leading base rows are real old tokens (the reference rows)."""
        return min(len(self.base), self.first_new_id)


InitFn = Callable[[torch.Tensor, NewTokens], torch.Tensor]


@dataclass(frozen=True)
class InitMethod:
    fn: InitFn
    needs: frozenset[str]  # side data: "static", "source_static", "alignment"


INITS: Registry[InitMethod] = Registry("new-token initialisation", "inits")


def register_init(
    name: str, description: str, needs: Sequence[str] = ()
) -> Callable[[InitFn], InitFn]:
    def decorator(fn: InitFn) -> InitFn:
        INITS.add(name, InitMethod(fn, frozenset(needs)), description)
        return fn

    return decorator


def initialise(name: str, old: torch.Tensor, tokens: NewTokens) -> torch.Tensor:
    """Rows for ``tokens.ids`` by the registered initialisation ``name`` (in ``old``'s dtype)."""
    method = INITS.get(name)
    for need in sorted(method.needs):
        if getattr(tokens, need) is None:
            what = {
                "static": "static embeddings of the new language",
                "source_static": "static embeddings of the pretraining languages",
                "alignment": "alignments",
            }
            raise ConfigError(f"init '{name}' needs {what[need]}, which were not computed")
    rows = method.fn(old, tokens)
    if tuple(rows.shape) != (len(tokens.ids), old.shape[1]):
        raise PolymnesiaError(f"init '{name}' returned {tuple(rows.shape)} rows")
    return rows.to(old.dtype)


# --- the simple ones ------------------------------------------------------------------------


def _mean(old: torch.Tensor, tokens: NewTokens) -> torch.Tensor:
    return old[: tokens.n_ref].mean(dim=0)


@register_init("mean", "the mean of the base rows")
def mean_init(old: torch.Tensor, tokens: NewTokens) -> torch.Tensor:
    return _mean(old, tokens).expand(len(tokens.ids), -1).clone()


def token_texts(tokens: NewTokens) -> list[str]:
    """The text of each new token (decoded by the merged tokenizer)."""
    m = tokens.merged
    return [m.convert_tokens_to_string([m.convert_ids_to_tokens(i)]) for i in tokens.ids]


@register_init("subtoken_mean", "mean of the base rows of the token's base tokenization")
def subtoken_mean_init(old: torch.Tensor, tokens: NewTokens) -> torch.Tensor:
    rows = mean_init(old, tokens)
    texts = token_texts(tokens)
    pieces = tokens.base(texts, add_special_tokens=False)["input_ids"] if texts else []
    for i, ids in enumerate(pieces):
        if ids:
            rows[i] = old[ids].mean(dim=0)
    return rows


@register_init("normal", "multivariate normal around the base rows' mean (transformers)")
def normal_init(
    old: torch.Tensor, tokens: NewTokens, *, scale: float = NORMAL_SCALE
) -> torch.Tensor:
    """Draws from N(mean, scale * cov) of the reference rows, seeded by ``tokens.seed``.

    transformers (``mean_resizing``) samples N(mean, 1e-9 cov) and falls back to the mean when
    the covariance is not positive definite; here a covariance square root from its eigen
    decomposition (negative eigenvalues clamped) draws from singular covariances too.
    """
    ref = old[: tokens.n_ref].double()
    mu = ref.mean(dim=0)
    centered = ref - mu
    cov = centered.T @ centered / ref.shape[0]
    evals, evecs = torch.linalg.eigh(cov)
    root = evecs * evals.clamp(min=0).sqrt()  # root @ root.T == cov
    gen = torch.Generator().manual_seed(tokens.seed)
    z = torch.randn((len(tokens.ids), ref.shape[1]), generator=gen, dtype=torch.float64)
    return mu + (scale**0.5) * z @ root.T


# --- static embeddings: FOCUS and OMP ---------------------------------------------------------


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


# --- alignment: trans-tokenization ------------------------------------------------------------


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
