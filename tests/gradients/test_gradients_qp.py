"""Simplex QP (quadprog vs clarabel, KKT), MGDA and LF-MLF."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.gradients import InfeasibleQP, get_combiner, solve_simplex_qp
from polymnesia.gradients import lf_mlf as lf_module
from polymnesia.gradients.base import gram_matrix

pytest.importorskip("clarabel")


def random_instance(seed: int, t: int = 6, d: int = 12):
    rng = np.random.default_rng(seed)
    grads = rng.normal(size=(t, d))
    grads[: t // 2] -= 1.5 * rng.normal(size=d)  # conflicts make constraints matter
    gram = grads @ grads.T
    acc = 3.0 * rng.normal(size=d)  # an accumulated update nabla-bar L
    return gram, grads @ acc


def assert_kkt(p, q, b, sol, tol=1e-6):
    """Stationarity, primal/dual feasibility and complementary slackness."""
    scale = max(np.abs(p).max(), np.abs(q).max())
    w = sol.w
    grad = p @ w + q - sol.nu - sol.lam - b.T @ sol.mu
    assert np.abs(grad).max() <= tol * scale, "stationarity"
    assert abs(w.sum() - 1) <= 1e-9 and (w >= 0).all(), "primal feasibility (simplex)"
    assert (b @ w >= -tol * scale).all(), "primal feasibility (b_t^T w >= 0)"
    assert (sol.lam >= -tol * scale).all() and (sol.mu >= -tol * scale).all(), "dual feasibility"
    assert np.abs(sol.lam * w).max() <= tol * scale, "complementary slackness (w)"
    assert np.abs(sol.mu * (b @ w)).max() <= tol * scale**2, "complementary slackness (b)"


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("solver", ["quadprog", "clarabel"])
def test_lf_mlf_qp_satisfies_kkt(seed, solver):
    gram, c = random_instance(seed)
    sol = lf_module.lf_mlf_solve(gram, c, solver)
    assert_kkt(gram, c, gram, sol)


@pytest.mark.parametrize("seed", range(8))
def test_quadprog_and_clarabel_agree(seed):
    gram, c = random_instance(seed, t=5, d=40)  # full rank: unique minimiser
    a = lf_module.lf_mlf_solve(gram, c, "quadprog").w
    b = lf_module.lf_mlf_solve(gram, c, "clarabel").w
    assert np.allclose(a, b, atol=1e-6)


def test_rank_deficient_gram_solves_with_the_ridge():
    # T = 6 > D = 3: G is singular; quadprog needs the ridge, directions must agree.
    gram, c = random_instance(1, t=6, d=3)
    objectives = []
    for solver in ("quadprog", "clarabel"):
        sol = lf_module.lf_mlf_solve(gram, c, solver)
        objectives.append(sol.w @ gram @ sol.w + 2 * sol.w @ c)  # Problem-1 objective
    assert objectives[0] == pytest.approx(objectives[1], rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("solver", ["quadprog", "clarabel"])
def test_empty_feasible_set_raises(solver):
    # B w >= 0 with B = [[1, -2], [-2, 1]] needs w1 >= 2 w2 and w2 >= 2 w1: impossible on the
    # simplex.
    with pytest.raises(InfeasibleQP, match="feasible set is empty"):
        solve_simplex_qp(np.eye(2), np.zeros(2), np.array([[1.0, -2.0], [-2.0, 1.0]]), solver)


def test_mgda_orthogonal_unit_vectors_get_equal_weights():
    combine = get_combiner("mgda")
    out = combine(torch.eye(2))
    assert torch.allclose(combine.weights, torch.tensor([0.5, 0.5], dtype=torch.float64))
    assert torch.allclose(out, torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("solver", ["quadprog", "clarabel"])
def test_mgda_direction_is_a_common_descent_direction(solver):
    grads = torch.randn(5, 30, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    d = get_combiner("mgda", solver=solver)(grads)
    # min-norm property: g_t . d >= ||d||^2 for every t
    assert (grads @ d >= d @ d - 1e-6).all()


def test_lf_mlf_equals_mgda_at_first_step_then_satisfies_kkt():
    gen = torch.Generator().manual_seed(3)
    lf, mg = get_combiner("lf_mlf"), get_combiner("mgda")
    grads = torch.randn(4, 50, generator=gen, dtype=torch.float64)
    assert torch.allclose(lf(grads), mg(grads), atol=1e-8)
    assert torch.allclose(lf.weights, mg.weights, atol=1e-6)
    for _ in range(3):
        grads = torch.randn(4, 50, generator=gen, dtype=torch.float64)
        acc = lf.accumulated.clone()
        d = lf(grads)
        gram, c = gram_matrix(grads), (grads @ acc).numpy()
        assert_kkt(gram, c, gram, lf.solution)
        assert (grads @ d >= -1e-8).all()  # common descent (Eq. 5)
        # the paper's objective: LF-MLF beats MGDA on ||nabla-bar L + d||
        assert (acc + d).norm() <= (acc + mg(grads)).norm() + 1e-9


def infeasible(*args, **kwargs):
    raise InfeasibleQP("QP feasible set is empty")


def test_infeasible_stops_by_default(monkeypatch):
    # Problem 2 always contains the MGDA point in exact arithmetic, so solver-reported
    # infeasibility is simulated here to test the control flow of Algorithm 1's stop.
    monkeypatch.setattr(lf_module, "lf_mlf_solve", infeasible)
    combine = get_combiner("lf_mlf")
    with pytest.raises(InfeasibleQP, match="LF-MLF step 1: .* Algorithm 1 stops"):
        combine(torch.tensor([[1.0, 0.0], [-1.0, 1.0]]))
    assert combine.stopped


@pytest.mark.parametrize("fallback,expected", [("mgda", [0.2, 0.4]), ("uniform", [0.0, 0.5])])
def test_infeasible_fallbacks(monkeypatch, fallback, expected):
    monkeypatch.setattr(lf_module, "lf_mlf_solve", infeasible)
    combine = get_combiner("lf_mlf", on_infeasible=fallback)
    out = combine(torch.tensor([[1.0, 0.0], [-1.0, 1.0]]))
    assert torch.allclose(out, torch.tensor(expected), atol=1e-6)
    assert combine.stopped and combine.steps == 1
    assert torch.allclose(combine.accumulated, out)
    combine.reset()
    assert not combine.stopped and combine.accumulated is None


def test_lf_mlf_state_round_trip_continues_identically():
    gen = torch.Generator().manual_seed(0)
    grads = [torch.randn(3, 20, generator=gen) for _ in range(5)]
    a = get_combiner("lf_mlf")
    for g in grads[:2]:
        a(g)
    saved = a.state_dict()
    expected = [a(g) for g in grads[2:]]
    b = get_combiner("lf_mlf")
    b.load_state_dict(saved)
    assert all(torch.equal(b(g), e) for g, e in zip(grads[2:], expected, strict=True))
    assert b.steps == 5


def test_observe_update_matches_direction_mode_under_sgd():
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(3, 10, generator=gen, dtype=torch.float64) for _ in range(4)]
    by_dir = get_combiner("lf_mlf")
    by_upd = get_combiner("lf_mlf", accumulate="update")
    for k, g in enumerate(grads):
        lr = 0.1 / (k + 1)  # a decaying schedule: -delta / lr is still the direction
        d1, d2 = by_dir(g), by_upd(g)
        assert torch.allclose(d1, d2, atol=1e-9)
        by_upd.observe_update(-lr * d2, lr)
    assert torch.allclose(by_dir.accumulated, by_upd.accumulated)
    with pytest.raises(ConfigError, match="accumulate='update'"):
        by_dir.observe_update(torch.zeros(10), 0.1)
    with pytest.raises(ConfigError, match="learning rate"):
        by_upd.observe_update(torch.zeros(10), 0.0)
