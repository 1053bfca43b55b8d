"""MGDA and the LF-MLF QP stay exact when per-language gradient norms differ by up to 1e6.

Reference: an independent exact solve of the min-norm QP in 60-digit
arithmetic (mpmath), by enumerating the supports of w and keeping the one
whose KKT system has a feasible solution (``w_S > 0`` and
``g_t . d >= ||d||^2`` off the support); unique because the Gram matrix of
independent gradients is positive definite.
"""

from __future__ import annotations

from itertools import combinations

import mpmath
import numpy as np
import pytest
import torch

from polymnesia.gradients import solve_simplex_qp
from polymnesia.gradients.mgda import mgda

mpmath.mp.dps = 60


def scaled_gradients(ratio: float, seed: int = 0, d: int = 16) -> np.ndarray:
    """Three float64 gradients scaled by sqrt(ratio), 1/sqrt(ratio) and 1 (issue 11's set-up)."""
    g = np.random.default_rng(seed).normal(size=(3, d))
    g[1] -= 0.8 * g[0]  # some conflict, so the answer is not a vertex
    return g * np.array([[ratio**0.5], [ratio**-0.5], [1.0]])


def min_norm_reference(g: np.ndarray) -> tuple[list, list]:
    """Exact simplex weights and direction of the min-norm point of the hull of g's rows."""
    rows = [[mpmath.mpf(float(x)) for x in r] for r in g]
    t = len(rows)
    gram = mpmath.matrix(t, t)
    for i in range(t):
        for j in range(t):
            gram[i, j] = mpmath.fsum(a * b for a, b in zip(rows[i], rows[j], strict=True))
    for k in range(1, t + 1):
        for support in combinations(range(t), k):
            m = mpmath.matrix(k + 1, k + 1)
            rhs = mpmath.matrix(k + 1, 1)
            for a, i in enumerate(support):
                for b, j in enumerate(support):
                    m[a, b] = gram[i, j]
                m[a, k], m[k, a] = -1, 1
            rhs[k] = 1
            try:
                sol = mpmath.lu_solve(m, rhs)
            except ZeroDivisionError:
                continue
            w = [mpmath.mpf(0)] * t
            for a, i in enumerate(support):
                w[i] = sol[a]
            nu = sol[k]  # = ||d||^2
            slack = [sum(gram[i, j] * w[j] for j in range(t)) - nu for i in range(t)]
            if all(x >= 0 for x in w) and all(s >= -nu * mpmath.mpf(10) ** -40 for s in slack):
                d = [mpmath.fsum(w[i] * rows[i][c] for i in range(t)) for c in range(len(rows[0]))]
                return w, d
    raise AssertionError("no KKT point found")


def rel_err(d: np.ndarray, ref: list) -> float:
    diff = mpmath.sqrt(
        mpmath.fsum((mpmath.mpf(float(x)) - r) ** 2 for x, r in zip(d, ref, strict=True))
    )
    return float(diff / mpmath.sqrt(mpmath.fsum(r**2 for r in ref)))


@pytest.mark.parametrize("ratio", [1e2, 1e4, 1e6])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mgda_direction_is_the_exact_min_norm_point(ratio: float, seed: int) -> None:
    g = scaled_gradients(ratio, seed)
    w_ref, d_ref = min_norm_reference(g)
    d, w = mgda(torch.from_numpy(g))
    assert rel_err(d.numpy(), d_ref) < 1e-9
    # the weights too, relative to each weight's share of the direction
    norms = np.linalg.norm(g, axis=1)
    share = np.abs(np.asarray([float(x) for x in w_ref]) - w) * norms
    assert share.max() < 1e-9 * np.linalg.norm([float(x) for x in d_ref]) + 1e-300


@pytest.mark.parametrize("ratio", [1e2, 1e4, 1e6])
def test_clarabel_agrees_at_large_norm_ratios(ratio: float) -> None:
    pytest.importorskip("clarabel")
    g = scaled_gradients(ratio, 3)
    _, d_ref = min_norm_reference(g)
    d, _ = mgda(torch.from_numpy(g), solver="clarabel")
    assert rel_err(d.numpy(), d_ref) < 1e-6  # interior point: solver tolerance ~1e-8


@pytest.mark.parametrize("ratio", [1e2, 1e4, 1e6])
def test_lf_mlf_qp_kkt_in_each_languages_own_scale(ratio: float) -> None:
    """Problem 2 with c != 0 and b_t^T w >= 0: KKT holds row by row, each row
    measured against its own gradient's norm (an absolute tolerance would hide
    errors in the small rows)."""
    g = scaled_gradients(ratio, 4)
    acc = np.random.default_rng(5).normal(size=g.shape[1])
    gram, c = g @ g.T, g @ acc
    sol = solve_simplex_qp(gram, c, gram)
    n = np.linalg.norm(g, axis=1)
    d = sol.w @ g
    stat = gram @ sol.w + c - sol.nu - sol.lam - gram.T @ sol.mu
    scale = n * (np.linalg.norm(d) + np.linalg.norm(acc))  # |g_t . (d + acc)| is at most this
    assert np.all(np.abs(stat) <= 1e-8 * scale), "stationarity"
    assert np.all(g @ d >= -1e-10 * n * np.linalg.norm(d)), "common descent b_t^T w >= 0"
    assert (sol.lam >= -1e-8 * scale).all() and (sol.mu >= -1e-8).all()


def test_singular_gram_still_gets_the_fallback_ridge() -> None:
    g = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1e-3]])  # a duplicated gradient: singular Gram
    sol = solve_simplex_qp(g @ g.T, np.zeros(3))
    d = sol.w @ g
    # min-norm point of the segment [(1, 0), (0, 1e-3)]: w_small = 1 / (1 + 1e-6)
    expected = np.array([1e-6, 1e-3]) / (1 + 1e-6)
    np.testing.assert_allclose(d, expected, rtol=1e-6)
