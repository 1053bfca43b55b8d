"""Small quadratic programs over the probability simplex.

Both MGDA (Sener and Koltun 2018) and LF-MLF (Mao et al. 2022, Problem 2,
Eq. 7) solve

    min_w  1/2 w^T P w + q^T w
    s.t.   1^T w = 1,   w >= 0,   B w >= 0        (B optional)

with P the T x T Gram matrix of the per-language gradients. This module
solves that shape with ``quadprog`` (Goldfarb-Idnani active set, the default:
fast for T <= 100) or ``clarabel`` (interior point, as the LF-MLF paper uses,
ref. [24] there; an optional dependency).

Numerics (all exact reformulations: the minimiser does not change):

* Jacobi scaling. Per-language gradient norms can differ by many orders of
  magnitude (a language whose loss is nearly flat), so ``P`` is solved in the
  variables ``v = D^{-1} w`` with ``D = diag(1 / sqrt(P_tt))``: the scaled
  Gram ``D P D`` has a unit diagonal (the cosines between gradients), the
  simplex becomes ``d^T v = 1, v >= 0`` and ``B w >= 0`` becomes
  ``(B D) v >= 0`` (each row of ``B D`` divided by its largest |entry|).
  Then P, q are divided by a common positive scale. Multipliers are mapped
  back to the caller's units. A zero gradient keeps ``d_t = 1``.
* No ridge when the scaled Gram is positive definite. Only when its smallest
  eigenvalue is below ``ridge`` (default 1e-10; the Gram is singular: T >
  rank, duplicated or zero gradients) does quadprog, which needs a strictly
  positive-definite matrix, get ``ridge`` added to the unit diagonal; the
  objective then moves by at most ``ridge * ||v||^2`` relative to the unit
  diagonal, far below float32 gradient noise. clarabel accepts semi-definite
  matrices and never gets a ridge. (An earlier version added
  ``1e-10 * trace(P)`` to the unscaled P: at gradient norm ratios of 1e4
  and more that ridge outweighed the small gradients' rows and moved the
  answer off the min-norm point, by 1e-4 relative at 1e4 and 0.1 at 1e6.)
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


@dataclass(frozen=True)
class _Scaled:
    """The QP in Jacobi-scaled variables ``v = w / d``: ``min 1/2 v^T p v + q^T v``,
    ``a^T v = 1``, ``v >= 0``, ``b v >= 0``; ``d``, ``s`` and ``rows`` map back."""

    p: np.ndarray
    q: np.ndarray
    a: np.ndarray
    b: np.ndarray
    d: np.ndarray  # w = d * v
    s: float  # common scale of p and q
    rows: np.ndarray  # scale of each row of b


def _jacobi_scaled(p: np.ndarray, q: np.ndarray, b: np.ndarray) -> _Scaled:
    diag = np.diag(p).copy()
    d = np.ones_like(diag)
    pos = diag > 0
    d[pos] = 1.0 / np.sqrt(diag[pos])
    d = d / d.max()  # the equality row d^T v = 1 has largest entry 1
    ps, qs, bs = p * np.outer(d, d), q * d, b * d
    rows = np.array([_scale(r) for r in bs]) if bs.size else np.ones(bs.shape[0])
    s = _scale(np.concatenate([ps.ravel(), qs]))
    return _Scaled(ps / s, qs / s, d, bs / rows[:, None], d, s, rows)


def solve_simplex_qp(
    p: np.ndarray,
    q: np.ndarray,
    b: np.ndarray | None = None,
    solver: str = "quadprog",
    ridge: float = 1e-10,
) -> QPSolution:
    """Solve ``min 1/2 w^T p w + q^T w`` on the simplex with optional ``b w >= 0``.

    Exact for positive-definite ``p`` whatever the spread of its diagonal
    (module docstring: Jacobi scaling, ``ridge`` only for a singular ``p``).
    Raises :class:`InfeasibleQP` when the solver proves the feasible set empty.
    """
    if solver not in SOLVERS:
        raise unknown("QP solver", solver, SOLVERS)
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    t = p.shape[0]
    bm = np.zeros((0, t)) if b is None else np.asarray(b, dtype=np.float64)
    sc = _jacobi_scaled(p, q, bm)
    if solver == "quadprog":
        unit = float(np.diag(sc.p).max()) if t else 1.0  # the scaled Gram's diagonal
        v, nu, ineq = _quadprog(sc.p, sc.q, sc.a, sc.b, ridge * (unit if unit > 0 else 1.0))
    else:
        v, nu, ineq = _clarabel(sc.p, sc.q, sc.a, sc.b)
    w = np.clip(sc.d * v, 0.0, None)
    w = w / w.sum() if w.sum() > 0 else np.full(t, 1.0 / t)
    # KKT of the scaled problem -> caller's units: nu = s nu',
    # lam_t = s lam'_t / d_t, mu_j = s mu'_j / rows_j (see _Scaled).
    return QPSolution(w, nu * sc.s, ineq[:t] * sc.s / sc.d, ineq[t:] * sc.s / sc.rows)


def _quadprog(
    p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray, ridge: float
) -> tuple[np.ndarray, float, np.ndarray]:
    import quadprog

    t = p.shape[0]
    if t and float(np.linalg.eigvalsh(p)[0]) < ridge:  # singular Gram: the only case with a ridge
        p = p + ridge * np.eye(t)
    # quadprog: min 1/2 x^T G x - a^T x  s.t.  C^T x >= rhs, first meq rows equal.
    c = np.concatenate([a[:, None], np.eye(t), b.T], axis=1)
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


def _clarabel(
    p: np.ndarray, q: np.ndarray, a_eq: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, float, np.ndarray]:
    try:
        import clarabel
    except ImportError:
        raise PolymnesiaError(
            "solver 'clarabel' needs the clarabel package (pip install 'polymnesia[solvers]')"
        ) from None
    from scipy import sparse

    t = p.shape[0]
    # clarabel: min 1/2 x^T P x + q^T x  s.t.  A x + s = rhs,  s in cones.
    a = np.concatenate([a_eq[None, :], -np.eye(t), -b], axis=0)
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
