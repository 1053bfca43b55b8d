"""The types, the registry and the simple initialisations of new-token rows (``mean``,
``subtoken_mean``, ``normal``); the package docstring lists them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import scipy.sparse as sp
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.registry import Registry

#: transformers' ``mean_resizing`` scales the old rows' covariance by this (Hewitt 2021)
NORMAL_SCALE = 1e-9


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
