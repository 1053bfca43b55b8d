"""The combiner interface, its registry and the checks every combiner shares.

A combiner maps the per-language gradient matrix ``grads`` [T, D] (row t is
the gradient of language t's loss w.r.t. the D shared parameters) to one
update direction [D]. Each method is a pure function of that matrix (and a
small state) plus a thin stateful class registered in :data:`COMBINERS`.

Shared conventions (every combiner, tested once for all):

* T = 1: the single gradient is returned unchanged, weights ``[1.0]``.
* all rows zero: a zero direction is returned, weights uniform ``1/T``; no
  state changes (no EMA update, no random draw, nothing accumulated).
* NaN/inf entries or a non-2-D input raise :class:`PolymnesiaError` naming
  the row (and the language, when ``languages=[...]`` is passed).
* ``weights`` is a CPU float64 tensor [T] such that ``direction =
  weights @ grads`` (``None`` where a method has no single weight vector,
  e.g. block-wise GradVac).

Sharded rows (FSDP2): every combiner sees ``grads`` only through inner products
(:func:`gram_matrix`, GradVac's :func:`~polymnesia.gradients.gradvac.block_grams`,
LF-MLF's linear term) and applies weights to the rows (:func:`weighted_sum`).
Inside :func:`sharded_rows`, ``grads`` holds each process's shard of the full rows:
the inner products are summed over processes (one all-reduce each), so every
process gets the same weights, and applies them to its own shard. No gradient is
gathered.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.registry import Registry

REDUCTIONS = ("sum", "mean")
_SUMS: list[Callable[[torch.Tensor], torch.Tensor]] = []  # innermost last


@contextlib.contextmanager
def sharded_rows(sum_over_processes: Callable[[torch.Tensor], torch.Tensor]) -> Iterator[None]:
    """Combine rows that are each process's shard of the full rows: every inner product is
    passed through ``sum_over_processes`` (an all-reduce sum) before it is used."""
    _SUMS.append(sum_over_processes)
    try:
        yield
    finally:
        _SUMS.pop()


def process_sum(t: torch.Tensor) -> torch.Tensor:
    """``t`` summed over the processes sharing the rows (itself outside :func:`sharded_rows`)."""
    return _SUMS[-1](t) if _SUMS else t


def inner(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """``a @ b`` as float64 numpy, summed over the processes in :func:`sharded_rows`."""
    return process_sum((a @ b).double()).cpu().numpy()


@runtime_checkable
class ObservesUpdates(Protocol):
    """A combiner that accumulates the optimizer's update (``accumulate="update"``)."""

    def observe_update(self, delta: torch.Tensor, lr: float) -> None: ...


class Combiner:
    """Base class: validation, the T = 1 and all-zero cases, and state plumbing."""

    name: ClassVar[str] = ""
    #: keys of :meth:`state_dict` holding a flat vector over the combined parameters (inside
    #: :func:`sharded_rows`: over this process's shards of them), which a checkpoint of a
    #: sharded run cuts for another number of processes
    flat_state: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.weights: torch.Tensor | None = None

    def __call__(self, grads: torch.Tensor, languages: Sequence[str] | None = None) -> torch.Tensor:
        check_grads(grads, languages)
        if grads.shape[0] == 1 or not _any(grads):
            return self._trivial(grads)
        return self._combine(grads)

    def _combine(self, grads: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _trivial(self, grads: torch.Tensor) -> torch.Tensor:
        t = grads.shape[0]
        self.weights = torch.full((t,), 1.0 / t, dtype=torch.float64)
        return grads[0].clone() if t == 1 else torch.zeros_like(grads[0])

    def state_dict(self) -> dict[str, Any]:
        """Small state needed for a resumed run to continue exactly."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        expected = set(self.state_dict())
        if set(state) != expected:
            raise ConfigError(
                f"{self.name} state has keys {sorted(state)}; expected {sorted(expected)}"
            )
        self._load(state)

    def _load(self, state: dict[str, Any]) -> None:
        """Restore the checked ``state``; subclasses with state override this."""

    def reset(self) -> None:
        """Forget all state (weights, EMA targets, accumulated updates, rng)."""
        self.weights = None


COMBINERS: Registry[type[Combiner]] = Registry(
    "combiner", "gradient-combiners", "polymnesia.gradients"
)


def get_combiner(name: str, **options: Any) -> Combiner:
    """Build the combiner registered as ``name`` with keyword ``options``."""
    cls = COMBINERS.get(name)
    params = inspect.signature(cls.__init__).parameters
    accepted = [p for p in params if p != "self"]
    for key in options:
        if key not in accepted:
            shown = ", ".join(accepted) if accepted else "none"
            raise ConfigError(f"combiner '{name}' has no option '{key}'; accepted: {shown}")
    return cls(**options)


def _any(grads: torch.Tensor) -> bool:
    if not _SUMS:
        return bool(grads.any())
    return bool(process_sum(grads.abs().sum().double().reshape(1)).item() > 0)


def check_grads(grads: object, languages: Sequence[str] | None = None) -> None:
    """Raise a one-line :class:`PolymnesiaError` unless ``grads`` is a finite [T, D] float
    tensor.
    """
    if not isinstance(grads, torch.Tensor):
        raise PolymnesiaError(f"grads must be a torch.Tensor [T, D], got {type(grads).__name__}")
    if grads.dim() != 2:
        raise PolymnesiaError(
            f"grads must be 2-D [T languages, D parameters], got shape {tuple(grads.shape)}"
        )
    if grads.shape[0] == 0 or grads.shape[1] == 0:
        raise PolymnesiaError(f"grads needs at least one row and column, got {tuple(grads.shape)}")
    if not grads.is_floating_point():
        raise PolymnesiaError(f"grads must be floating point, got {grads.dtype}")
    if languages is not None and len(languages) != grads.shape[0]:
        raise PolymnesiaError(
            f"languages names {len(languages)} languages but grads has {grads.shape[0]} rows"
        )
    if bool(torch.isfinite(grads.sum(dim=1)).all()):
        return  # cheap check first; the exact one below only runs on failure
    bad = (~torch.isfinite(grads)).any(dim=1).nonzero().flatten().tolist()
    if bad:
        row = bad[0]
        who = f" (language '{languages[row]}')" if languages is not None else ""
        raise PolymnesiaError(
            f"gradient row {row}{who} has NaN or infinite entries; all gradients must be finite"
        )


def check_reduction(reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise ConfigError(f"reduction must be one of {', '.join(REDUCTIONS)}, got '{reduction}'")
    return reduction


def gram_matrix(grads: torch.Tensor) -> np.ndarray:
    """``grads grads^T`` as a float64 numpy array [T, T] (half precision is upcast first)."""
    g = grads.float() if grads.dtype in (torch.float16, torch.bfloat16) else grads
    return inner(g, g.T)


def weighted_sum(weights: np.ndarray, grads: torch.Tensor) -> torch.Tensor:
    """``weights @ grads`` -> [D] in the dtype and device of ``grads``."""
    w = torch.from_numpy(np.ascontiguousarray(weights)).to(grads.device, grads.dtype)
    return w @ grads


def random_orders(t: int, generator: torch.Generator) -> list[list[int]]:
    """For each task i a random permutation of the other tasks (drawn from ``generator``)."""
    orders = []
    for i in range(t):
        others = [j for j in range(t) if j != i]
        perm = torch.randperm(t - 1, generator=generator).tolist()
        orders.append([others[k] for k in perm])
    return orders


def new_generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen
