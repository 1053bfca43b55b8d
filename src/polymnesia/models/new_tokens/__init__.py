"""Initialisations of new-token embedding rows (vocabulary expansion, Aggarwal et al. 2024; issue
26).

Each initialisation is a pure function registered in :data:`INITS`:
``fn(old, tokens) -> rows``. ``old`` holds the base vocabulary's rows
(``[len(base tokenizer), d]``, embeddings or LM head), ``tokens``
(:class:`NewTokens`) the base and merged tokenizers, the new ids and any side
data; ``rows`` is ``[len(tokens.ids), d]``, row ``i`` for merged id
``tokens.ids[i]``. Nothing here touches a model: resizing and writing the rows
is :func:`polymnesia.models.resize.resize_and_init`.

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

The registry, the types and the simple initialisations are in :mod:`.base`; FOCUS and OMP
in :mod:`.static`; trans-tokenization and WECHSEL in :mod:`.aligned`. Importing the package
registers all of them.
"""

from __future__ import annotations

from polymnesia.models.new_tokens.aligned import (
    WECHSEL_K,
    WECHSEL_TEMPERATURE,
    align_init,
    ibm1_alignment,
    procrustes,
    wechsel_init,
    wechsel_weights,
)
from polymnesia.models.new_tokens.base import (
    INITS,
    NORMAL_SCALE,
    Alignment,
    InitFn,
    InitMethod,
    NewTokens,
    StaticEmbeddings,
    initialise,
    mean_init,
    normal_init,
    register_init,
    subtoken_mean_init,
    token_texts,
)
from polymnesia.models.new_tokens.static import (
    OMP_ATOMS,
    focus_init,
    focus_weights,
    omp,
    omp_init,
    sparsemax,
    sparsemax_topk,
    static_embeddings,
)

__all__ = [
    "Alignment",
    "INITS",
    "InitFn",
    "InitMethod",
    "NORMAL_SCALE",
    "NewTokens",
    "OMP_ATOMS",
    "StaticEmbeddings",
    "WECHSEL_K",
    "WECHSEL_TEMPERATURE",
    "align_init",
    "focus_init",
    "focus_weights",
    "ibm1_alignment",
    "initialise",
    "mean_init",
    "normal_init",
    "omp",
    "omp_init",
    "procrustes",
    "register_init",
    "sparsemax",
    "sparsemax_topk",
    "static_embeddings",
    "subtoken_mean_init",
    "token_texts",
    "wechsel_init",
    "wechsel_weights",
]
