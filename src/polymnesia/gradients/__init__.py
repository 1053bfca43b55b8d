"""Per-language gradient combiners: uniform, PCGrad, GradVac, MGDA and LF-MLF.

>>> from polymnesia.gradients import get_combiner
>>> combine = get_combiner("lf_mlf")
>>> direction = combine(grads)          # grads [T, D] -> [D]   # doctest: +SKIP

See docs/gradients.md for the equations each method implements.
"""

from polymnesia.gradients.base import (
    COMBINERS,
    Combiner,
    check_grads,
    get_combiner,
    sharded_rows,
)
from polymnesia.gradients.flat import (
    assign_flat_grad,
    block_sizes,
    flatten_grads,
    per_language_gradients,
)
from polymnesia.gradients.qp import InfeasibleQP, QPSolution, solve_simplex_qp
from polymnesia.registry_imports import import_submodules

import_submodules(__name__)

__all__ = [
    "COMBINERS",
    "Combiner",
    "InfeasibleQP",
    "QPSolution",
    "assign_flat_grad",
    "block_sizes",
    "check_grads",
    "flatten_grads",
    "get_combiner",
    "per_language_gradients",
    "sharded_rows",
    "solve_simplex_qp",
]
