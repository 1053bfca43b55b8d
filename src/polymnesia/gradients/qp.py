"""Small quadratic programs over the probability simplex.

Both MGDA (Sener and Koltun 2018) and LF-MLF (Mao et al. 2022, Problem 2,
Eq. 7) solve

    min_w  1/2 w^T P w + q^T w
    s.t.   1^T w = 1,   w >= 0,   B w >= 0        (B optional)

with P the T x T Gram matrix of the per-language gradients. This module
solves that shape with ``quadprog`` (Goldfarb-Idnani active set, the default:
fast for T <= 100) or ``clarabel`` (interior point, as the LF-MLF paper uses,
ref. [24] there; an optional dependency).

Numerics (departures from a textbook QP, all invariant for the solution):

* P, q are divided by a common positive scale (the largest |entry|), and B by
  its own; minimisers and feasible sets do not change, duals are mapped back.
* quadprog needs P strictly positive definite, a Gram matrix is only
  semi-definite (T > rank, duplicated languages), so ``ridge * trace(P)`` is
  added to the diagonal for quadprog only (default 1e-10: far below float32
  gradient noise). clarabel accepts semi-definite P and gets no ridge.
* The returned w is clipped at 0 and renormalised to sum 1 (removes -1e-17
  round-off); multipliers are returned as the solver found them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from polymnesia.errors import PolymnesiaError, unknown

SOLVERS = ("quadprog", "clarabel")


class InfeasibleQP(PolymnesiaError):
    """The feasible set of the QP is empty (LF-MLF's Algorithm 1 stops here)."""


@dataclass(frozen=True)
class QPSolution:
    """Primal solution and KKT multipliers of the simplex QP.

    KKT (in the caller's unscaled units):
    ``P w + q = nu * 1 + lam + B^T mu`` with ``lam, mu >= 0``,
    ``lam_i w_i = 0`` and ``mu_j (B w)_j = 0``.
    """

    w: np.ndarray  # [T]
    nu: float  # multiplier of 1^T w = 1
    lam: np.ndarray  # [T] multipliers of w >= 0
    mu: np.ndarray  # [m] multipliers of B w >= 0 (m = 0 without B)


def _scale(matrix: np.ndarray) -> float:
    s = float(np.abs(matrix).max()) if matrix.size else 0.0
    return s if s > 0 and np.isfinite(s) else 1.0


def solve_simplex_qp(
    p: np.ndarray,
    q: np.ndarray,
    b: np.ndarray | None = None,
    solver: str = "quadprog",
    ridge: float = 1e-10,
) -> QPSolution:
    """Solve ``min 1/2 w^T p w + q^T w`` on the simplex with optional ``b w >= 0``.

    Raises :class:`InfeasibleQP` when the solver proves the feasible set empty.
    """
    if solver not in SOLVERS:
        raise unknown("QP solver", solver, SOLVERS)
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    t = p.shape[0]
    bm = np.zeros((0, t)) if b is None else np.asarray(b, dtype=np.float64)
    s_pq = _scale(np.concatenate([p.ravel(), q]))
    s_b = _scale(bm)
    ps, qs, bs = p / s_pq, q / s_pq, bm / s_b
    if solver == "quadprog":
        w, nu, ineq = _quadprog(ps, qs, bs, ridge)
    else:
        w, nu, ineq = _clarabel(ps, qs, bs)
    w = np.clip(w, 0.0, None)
    w = w / w.sum() if w.sum() > 0 else np.full(t, 1.0 / t)
    return QPSolution(w, nu * s_pq, ineq[:t] * s_pq, ineq[t:] * s_pq / s_b)


def _quadprog(
    p: np.ndarray, q: np.ndarray, b: np.ndarray, ridge: float
) -> tuple[np.ndarray, float, np.ndarray]:
    import quadprog

    t = p.shape[0]
    trace = float(np.trace(p))
    p = p + ridge * (trace if trace > 0 else 1.0) * np.eye(t)
    # quadprog: min 1/2 x^T G x - a^T x  s.t.  C^T x >= rhs, first meq rows equal.
    c = np.concatenate([np.ones((t, 1)), np.eye(t), b.T], axis=1)
    rhs = np.concatenate([[1.0], np.zeros(t + b.shape[0])])
    try:
        out = quadprog.solve_qp(p, -q, c, rhs, meq=1)
    except ValueError as err:
        if "inconsistent" in str(err):
            raise InfeasibleQP(
                "QP feasible set is empty (quadprog: constraints inconsistent)"
            ) from None
        raise PolymnesiaError(f"quadprog failed on the {t}x{t} QP: {err}") from None
    lagr = np.asarray(out[4], dtype=np.float64)
    return np.asarray(out[0], dtype=np.float64), float(lagr[0]), lagr[1:]


def _clarabel(p: np.ndarray, q: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    try:
        import clarabel
    except ImportError:
        raise PolymnesiaError(
            "solver 'clarabel' needs the clarabel package (pip install 'polymnesia[solvers]')"
        ) from None
    from scipy import sparse

    t = p.shape[0]
    # clarabel: min 1/2 x^T P x + q^T x  s.t.  A x + s = rhs,  s in cones.
    a = np.concatenate([np.ones((1, t)), -np.eye(t), -b], axis=0)
    rhs = np.concatenate([[1.0], np.zeros(t + b.shape[0])])
    cones = [clarabel.ZeroConeT(1), clarabel.NonnegativeConeT(t + b.shape[0])]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solver = clarabel.DefaultSolver(
        sparse.triu(sparse.csc_matrix(p)).tocsc(), q, sparse.csc_matrix(a), rhs, cones, settings
    )
    sol = solver.solve()
    status = str(sol.status)
    if "Infeasible" in status:
        raise InfeasibleQP(f"QP feasible set is empty (clarabel status {status})")
    if status not in ("Solved", "AlmostSolved"):
        raise PolymnesiaError(f"clarabel failed on the {t}x{t} QP: status {status}")
    z = np.asarray(sol.z, dtype=np.float64)
    # KKT of clarabel: P x + q + A^T z = 0, so nu = -z_eq and the cone duals are lam, mu.
    return np.asarray(sol.x, dtype=np.float64), -float(z[0]), z[1:]
