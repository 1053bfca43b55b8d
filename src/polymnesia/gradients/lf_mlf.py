"""LF-MLF: less-forgetting multi-lingual fine-tuning (Mao et al. 2022, Section 3.3).

Problem 2 (Eq. 7), solved at every step k for convex weights w:

    min_w  1/2 w^T G w + w^T c
    s.t.   b_t^T w >= 0 (t = 1..T),   sum_t w_t = 1,   w >= 0

with G = grads grads^T (the paper writes ``grad L^T grad L`` for the T x T
Gram matrix), b_t = grads g_t (column t of G, so ``b_t^T w = g_t . d``: the
common-descent constraint, Eq. 5) and c = grads ``nabla-bar L``, where
``nabla-bar L = sum_{i<k} sum_t w_t^i g_t^i`` is the sum of the earlier
combined directions (Eq. 3; c = 0 at the first step, Algorithm 1). Problem 2
is Problem 1 (Eq. 6: min ||nabla-bar L + w^T grads||^2) expanded and halved.
The direction is d = w^T grads (Eq. 8: theta_k = theta_{k-1} - eta d).

What is accumulated (``accumulate``):

* "direction" (default, the paper): after each call the returned d is added
  to ``nabla-bar L``. Under plain SGD, theta_p - theta_{k-1} = eta nabla-bar L,
  so Problem 1 minimises the distance to the pre-trained weights (Theorem 1).
* "update": the caller reports the parameter change it actually applied with
  ``observe_update(delta, lr)`` (delta = theta_k - theta_{k-1}, flat [D]) and
  ``-delta / lr`` is accumulated. With SGD this equals "direction" for any lr
  schedule; with Adam(W), clipping or weight decay it tracks the real
  displacement from theta_p (in gradient units), which is what Theorem 1
  bounds. The paper trains with AdamW but states the SGD form.

Feasibility: in exact arithmetic Problem 2 is never infeasible, since the
MGDA min-norm point d* satisfies g_t . d* >= ||d*||^2 >= 0; the feasible set
shrinks to a degenerate set only at (near) Pareto-stationary points, where the
solver may report it empty. Algorithm 1 then stops: by default
(``on_infeasible="stop"``) :class:`InfeasibleQP` is raised and ``stopped`` is
set; "mgda" falls back to the min-norm point (no c term, no b constraints)
and "uniform" to the mean, both still setting ``stopped`` so a training loop
can notice.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from polymnesia.errors import ConfigError, PolymnesiaError, unknown
from polymnesia.gradients.base import COMBINERS, Combiner, gram_matrix, inner, weighted_sum
from polymnesia.gradients.mgda import mgda_weights
from polymnesia.gradients.qp import SOLVERS, InfeasibleQP, QPSolution, solve_simplex_qp

ON_INFEASIBLE = ("stop", "mgda", "uniform")
ACCUMULATE = ("direction", "update")


def lf_mlf_solve(
    gram: np.ndarray, c: np.ndarray, solver: str = "quadprog", ridge: float = 1e-10
) -> QPSolution:
    """Solve Problem 2 for the Gram matrix [T, T] and linear term c [T] (b_t = column t of G)."""
    return solve_simplex_qp(gram, c, gram, solver, ridge)


def lf_mlf(
    grads: torch.Tensor, accumulated: torch.Tensor | None, solver: str = "quadprog"
) -> tuple[torch.Tensor, QPSolution]:
    """LF-MLF direction [D] and QP solution for ``grads`` and ``nabla-bar L`` (None at step 1)."""
    sol = lf_mlf_solve(gram_matrix(grads), linear_term(grads, accumulated), solver)
    return weighted_sum(sol.w, grads), sol


def linear_term(grads: torch.Tensor, accumulated: torch.Tensor | None) -> np.ndarray:
    """c = grads nabla-bar L as float64 [T] (zeros when nothing is accumulated yet)."""
    if accumulated is None:
        return np.zeros(grads.shape[0])
    if accumulated.shape != grads.shape[1:]:
        raise PolymnesiaError(
            f"LF-MLF accumulated update has {accumulated.numel()} entries but grads have D = "
            f"{grads.shape[1]}"
        )
    return inner(grads, accumulated.to(grads.device, grads.dtype))


@COMBINERS.register("lf_mlf", "less-forgetting QP over convex weights (Mao et al. 2022, Problem 2)")
class LFMLF(Combiner):
    """LF-MLF with the accumulated update in its state; see the module docstring."""

    name = "lf_mlf"
    flat_state = ("accumulated",)

    def __init__(
        self,
        solver: str = "quadprog",
        on_infeasible: str = "stop",
        accumulate: str = "direction",
        ridge: float = 1e-10,
    ) -> None:
        super().__init__()
        if solver not in SOLVERS:
            raise unknown("QP solver", solver, SOLVERS)
        if on_infeasible not in ON_INFEASIBLE:
            raise ConfigError(
                f"on_infeasible must be one of {ON_INFEASIBLE}, got '{on_infeasible}'"
            )
        if accumulate not in ACCUMULATE:
            raise ConfigError(f"accumulate must be one of {ACCUMULATE}, got '{accumulate}'")
        self.solver, self.on_infeasible, self.accumulate = solver, on_infeasible, accumulate
        self.ridge = ridge
        self.accumulated: torch.Tensor | None = None  # nabla-bar L [D]
        self.steps = 0
        self.stopped = False
        self.solution: QPSolution | None = None  # last QP solution (with KKT multipliers)

    def _combine(self, grads: torch.Tensor) -> torch.Tensor:
        gram = gram_matrix(grads)
        c = linear_term(grads, self.accumulated)
        try:
            self.solution = lf_mlf_solve(gram, c, self.solver, self.ridge)
            weights = self.solution.w
        except InfeasibleQP:
            weights = self._infeasible(gram)
        self.weights = torch.from_numpy(weights)
        return self._record(weighted_sum(weights, grads))

    def _infeasible(self, gram: np.ndarray) -> np.ndarray:
        self.stopped, self.solution = True, None
        if self.on_infeasible == "stop":
            raise InfeasibleQP(
                f"LF-MLF step {self.steps + 1}: the feasible set of Problem 2 is empty, so "
                "Algorithm 1 stops (on_infeasible='mgda' or 'uniform' continues instead)"
            )
        if self.on_infeasible == "mgda":
            return mgda_weights(gram, self.solver)
        return np.full(gram.shape[0], 1.0 / gram.shape[0])

    def _trivial(self, grads: torch.Tensor) -> torch.Tensor:
        self.solution = None
        return self._record(super()._trivial(grads))

    def _record(self, direction: torch.Tensor) -> torch.Tensor:
        self.steps += 1
        if self.accumulate == "direction":
            self._add(direction, 1.0)
        return direction

    def _add(self, vec: torch.Tensor, alpha: float) -> None:
        if self.accumulated is None:
            dtype = torch.float64 if vec.dtype == torch.float64 else torch.float32
            self.accumulated = torch.zeros(vec.shape, dtype=dtype, device=vec.device)
        elif self.accumulated.shape != vec.shape:
            raise PolymnesiaError(
                f"LF-MLF got a vector of {vec.numel()} entries, but accumulated "
                f"{self.accumulated.numel()}"
            )
        self.accumulated.add_(vec.to(self.accumulated.dtype), alpha=alpha)

    def observe_update(self, delta: torch.Tensor, lr: float) -> None:
        """Accumulate ``-delta / lr`` (delta = theta_k - theta_{k-1} just applied, flat [D])."""
        if self.accumulate != "update":
            raise ConfigError("observe_update needs lf_mlf(accumulate='update'); it is 'direction'")
        if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise ConfigError(f"observe_update needs a finite learning rate > 0, got {lr}")
        if not isinstance(delta, torch.Tensor) or delta.dim() != 1:
            raise PolymnesiaError("observe_update needs delta as a flat 1-D tensor [D]")
        self._add(delta.detach(), -1.0 / lr)

    def state_dict(self) -> dict[str, Any]:
        acc = None if self.accumulated is None else self.accumulated.clone()
        return {"accumulated": acc, "steps": self.steps, "stopped": self.stopped}

    def _load(self, state: dict[str, Any]) -> None:
        acc = state["accumulated"]
        self.accumulated = None if acc is None else acc.detach().clone()
        self.steps, self.stopped = int(state["steps"]), bool(state["stopped"])

    def reset(self) -> None:
        super().reset()
        self.accumulated, self.solution = None, None
        self.steps, self.stopped = 0, False
